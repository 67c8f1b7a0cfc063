// Follows a served page through a zoom the way a person would, and prints what it saw as one
// JSON object (the Rust test asserts):
//
//   node tests/browser/check_served.mjs URL FIRST LAST
//
// 1. opens URL#window=FIRST-LAST: the plot's window as it opens;
// 2. waits for the moment sections to follow the window (the moment "window peak");
// 3. pins the largest band painted alone, zooms into the first half of its life inside the
//    window, and reads the pinned allocation again;
// 4. resets the zoom: the hash and the window's moment are gone.
// CHROMIUM overrides the browser (default /usr/bin/chromium). Exit 2 when the driver failed.
import { launch } from "./browser.mjs";

const [url, firstArg, lastArg] = process.argv.slice(2);
const first = Number(firstArg), last = Number(lastArg);
const out = { opened: null, moment: null, moment_select: null, flame_heading: null, pinned: null, zoomed: null,
  pinned_after: null, reset: null, errors: [] };
let browser;
try {
  browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
  page.on("pageerror", (e) => out.errors.push(String((e && e.message) || e)));
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(m.text()); });
  await page.goto(url + "#window=" + first + "-" + last, { waitUntil: "commit" });
  await page.waitForFunction(() => window.memlens && window.memlens.ready === true, null, { timeout: 60000 });
  out.opened = await page.evaluate(() => ({ ...window.memlens.plot }));
  await page.waitForFunction(() => window.memlens.moment === "window peak", null, { timeout: 20000 });
  Object.assign(out, await page.evaluate(() => ({
    moment: { ...window.memlens.momentShown },
    moment_select: document.getElementById("moment-select") ? document.getElementById("moment-select").value : null,
    flame_heading: document.getElementById("flame") ? document.getElementById("flame").textContent.slice(0, 300) : null,
  })));
  // the largest band painted alone
  const pick = await page.evaluate(() => {
    const m = window.memlens;
    let best = null;
    for (let i = 0; i < m.bandCount(); i++) {
      const b = m.bandInfo(i);
      if ((!best || b.size > best.b.size) && m.bandPoint(i)) best = { i, b };
    }
    return best;
  });
  if (pick) {
    const p = await page.evaluate((i) => window.memlens.bandPoint(i), pick.i);
    await page.mouse.click(p.x, p.y);
    out.pinned = await page.evaluate(() => window.memlens.pinned == null ? null : window.memlens.bandInfo(window.memlens.pinned));
    const a = Math.max(first, pick.b.alloc_event);
    const end = Math.min(last, pick.b.free_event == null ? last : pick.b.free_event);
    const b = Math.max(a, Math.floor((a + end) / 2));
    await page.evaluate(([x, y]) => window.memlens.zoom(x, y), [a, b]);
    out.zoomed = await page.evaluate(() => ({ ...window.memlens.plot, hash: location.hash }));
    out.pinned_after = await page.evaluate(() => window.memlens.pinned == null ? null : window.memlens.bandInfo(window.memlens.pinned));
  }
  await page.evaluate(() => {
    const b = [...document.querySelectorAll("#timeline button")].find((x) => x.textContent === "Reset zoom");
    b.click();
  });
  await page.waitForFunction(() => window.memlens.moment !== "window peak", null, { timeout: 10000 }).catch(() => {});
  out.reset = await page.evaluate(() => ({
    plot: { ...window.memlens.plot }, hash: location.hash, moment: window.memlens.moment,
    options: [...document.querySelectorAll("#moment-select option")].map((o) => o.value),
  }));
  out.errors.push(...(await page.evaluate(() => window.memlens.errors.slice())));
  await browser.close();
} catch (e) {
  process.stderr.write("driver failure: " + ((e && e.stack) || e) + "\n");
  if (browser) await browser.close().catch(() => {});
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(2);
}
process.stdout.write(JSON.stringify(out) + "\n");
