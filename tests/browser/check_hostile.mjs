// Loads a memlens HTML report made from a hostile snapshot (frame and file names holding
// `<script>` and `onerror=` markup) in headless Chromium and prints ONE JSON object on stdout:
// whether the page came up, whether any injected code ran (`window.pwned`), whether the names
// are shown as literal text, and what the page's policy refused when a script and a handler
// were slipped into the page as an escaping slip would (they must not run). It asserts
// nothing: tests/it/surfaces/escapes.rs does.
//
//   node tests/browser/check_hostile.mjs REPORT.html NEEDLE...
//
// Exit 0 when the page could be run, 2 when the driver failed.
import { launch } from "./browser.mjs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [file, ...needles] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: node check_hostile.mjs REPORT.html NEEDLE...\n");
  process.exit(2);
}
const url = pathToFileURL(path.resolve(file)).href;
const out = { ready: false, console_errors: [], page_errors: [], pwned: null, shown: {}, violations: [], slipped_ran: null };
let browser;
try {
  browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error") out.console_errors.push(m.text()); });
  page.on("pageerror", (e) => out.page_errors.push(String((e && e.message) || e)));
  await page.route("**/*", (route) => (route.request().url() === url ? route.continue() : route.abort()));
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective));
  });
  await page.goto(url, { waitUntil: "commit" });
  await page.waitForFunction(() => window.memlens && window.memlens.ready === true, null, { timeout: 20000 });
  out.ready = true;
  // The page as drawn: every section's text, the names among it.
  const text = await page.evaluate(() => document.body.innerText);
  for (const n of needles) out.shown[n] = text.includes(n);
  // What an escaping slip would put in the page: an inline script and an inline handler.
  // The policy names only the page's own script, so neither may run.
  await page.evaluate(() => {
    const s = document.createElement("script");
    s.textContent = "window.pwned = 'script'";
    document.body.appendChild(s);
    const d = document.createElement("div");
    d.innerHTML = "<img src=\"data:,x\" onerror=\"window.pwned='onerror'\"><svg><image href=\"data:,x\" onerror=\"window.pwned='svg'\"/></svg>";
    document.body.appendChild(d);
  });
  await page.waitForTimeout(300);
  out.pwned = await page.evaluate(() => (window.pwned === undefined ? null : String(window.pwned)));
  out.violations = await page.evaluate(() => window.__violations.slice());
  process.stdout.write(JSON.stringify(out) + "\n");
  await browser.close();
} catch (e) {
  process.stderr.write(String((e && e.stack) || e) + "\n");
  if (browser) await browser.close();
  process.exit(2);
}
