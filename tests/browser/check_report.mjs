// Loads a memlens HTML report in headless Chromium, exercises it like a person would, and
// prints what it saw as ONE JSON object on stdout. It asserts nothing: the Rust test that
// runs it compares the figures with `memlens ... --format json`.
//
//   node tests/browser/check_report.mjs REPORT.html [--screenshot OUT.png] [--section ID] [--width 1400]
//
// Exit 0 when the page could be run (even if it misbehaved), 2 when the driver failed.
// CHROMIUM overrides the browser (default /usr/bin/chromium).
import { launch } from "./browser.mjs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const screenshot = opt("--screenshot", null);
const sectionId = opt("--section", null);
const width = Number(opt("--width", "1400"));
const file = args[0];
if (!file || args.length !== 1 || !(width > 0)) {
  process.stderr.write("usage: node check_report.mjs REPORT.html [--screenshot OUT.png] [--section ID] [--width 1400]\n");
  process.exit(2);
}
const url = pathToFileURL(path.resolve(file)).href;

const out = {
  console_errors: [], page_errors: [], requests: [], ready: false, ready_ms: null, script_ready_ms: null,
  drawn: null, memlens_errors: [], peak_bytes: null, peak_text: null, oom_verdicts: [],
  hover: null, zoom: null, pin: null, flame_search: null, absent_texts: [], pretrace: null, top_rows: [], judgements: [], header: null, lines: null, lines_after: null,
};
const memlens = (page) => page.evaluate(() => {
  const m = window.memlens;
  return m ? { ready: m.ready, drawn: { ...m.drawn }, view: { ...m.view }, pinned: m.pinned, errors: m.errors.slice(), readyMs: m.readyMs } : null;
});

let browser;
try {
  browser = await launch();
  const page = await browser.newPage({ viewport: { width, height: 900 }, deviceScaleFactor: 1 });
  page.on("console", (m) => { if (m.type() === "error") out.console_errors.push(m.text()); });
  page.on("pageerror", (e) => out.page_errors.push(String((e && e.message) || e)));
  const other = (u) => u !== url && !out.requests.includes(u) && out.requests.push(u);
  page.on("request", (r) => other(r.url()));
  await page.route("**/*", (route) => {
    const u = route.request().url();
    if (u === url) return route.continue();
    other(u);
    return route.abort();
  });

  const t0 = Date.now();
  await page.goto(url, { waitUntil: "commit" });
  try {
    await page.waitForFunction(() => window.memlens && window.memlens.ready === true, null, { timeout: 20000 });
    out.ready = true;
    out.ready_ms = Date.now() - t0;
  } catch (_) { /* ready stays false */ }
  const m0 = await memlens(page);
  out.drawn = m0 && m0.drawn;
  out.script_ready_ms = m0 && m0.readyMs != null ? m0.readyMs : null;

  Object.assign(out, await page.evaluate(() => {
    const peak = document.querySelector("[data-testid=peak-bytes]");
    return {
      peak_bytes: peak ? Number(peak.getAttribute("data-bytes")) : null,
      peak_text: peak ? peak.textContent : null,
      oom_verdicts: [...document.querySelectorAll("[data-testid=oom-verdict]")].map((e) => e.textContent),
      absent_texts: [...new Set([...document.querySelectorAll("[data-testid=absent]")].map((e) => e.textContent))],
    };
  }));

  // The band to hover and pin, and a frame name to search for.
  const probe = !out.ready ? { band: null, query: null } : await page.evaluate(() => {
    const data = JSON.parse(document.getElementById("memlens-data").textContent);
    const dp = data.devices.find((d) => d.device === window.memlens.device);
    // The band covering the most area (bytes x events) among those painted alone (a band
    // under a pixel tall is part of a stratum): one a person can point at. The largest by
    // bytes alone may live for a sliver of a long trace.
    let band = null;
    if (dp && dp.timeline) {
      const t = dp.timeline, last = t.window.last;
      const area = (b) => b.size * Math.max(1, Math.min(b.free_event == null ? last : b.free_event, last) - Math.max(b.alloc_event, t.window.first));
      const order = t.bands.map((b, i) => i).sort((x, y) => area(t.bands[y]) - area(t.bands[x]));
      band = order.find((i) => window.memlens.bandPoint(i) !== null);
      if (band === undefined) band = null;
    }
    // a frame holding part of the flame's total (columns in pre-order), else the root's first callee
    const tree = dp && dp.moments[0] ? dp.moments[0].flame.all : null;
    let node = tree ? tree.value.findIndex((v, i) => i > 0 && tree.frame[i] >= 0 && v < tree.value[0]) : -1;
    if (node < 0 && tree && tree.frame.length > 1) node = 1;
    const f = node > 0 ? tree.frame[node] : null;
    const query = f === null ? null : f < 0 ? "<no frames>" : data.frames[f].name;
    return { band, query };
  });

  if (out.ready && probe.band !== null) {
    const band = probe.band;
    await page.locator("#timeline canvas.tl-over").scrollIntoViewIfNeeded();
    const p = await page.evaluate((i) => window.memlens.bandPoint(i), band);
    let tooltip = null;
    if (p) {
      await page.mouse.move(p.x, p.y);
      tooltip = await page.evaluate(() => { const t = document.getElementById("tooltip"); return t && !t.hidden ? t.innerText : null; });
    }
    out.hover = { band, point: p, tooltip };

    const box = await page.locator("#timeline canvas.tl-over").boundingBox();
    const y = box.y + box.height / 2;
    const before = (await memlens(page)).view;
    await page.mouse.move(box.x + box.width * 0.3, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, y, { steps: 5 });
    await page.mouse.up();
    const after = (await memlens(page)).view;
    await page.mouse.dblclick(box.x + box.width * 0.45, y);
    const reset = (await memlens(page)).view;
    out.zoom = { before, after, reset };

    await page.mouse.move(box.x + 2, box.y + 2);
    const q = await page.evaluate((i) => window.memlens.bandPoint(i), band);
    if (q) await page.mouse.click(q.x, q.y);
    const pinned = (await memlens(page)).pinned;
    const site = await page.evaluate(() => {
      const r = document.querySelector("#top tr.pinned");
      return r ? r.getAttribute("data-site") : null;
    });
    out.pin = { band, pinned, highlighted_row: site !== null, highlighted_site: site };
  }

  // The top table's rows as shown: each row's recorded site (data-site), the text of its site
  // cell's first line and its "via" context line.
  if (out.ready) {
    out.top_rows = await page.evaluate(() => [...document.querySelectorAll("#top tr.row")].map((r) => {
      const cell = r.querySelector("td.site");
      const via = cell ? cell.querySelector("[data-testid=site-context]") : null;
      let own = "";
      if (cell) for (const n of cell.childNodes) { if (n.nodeType === 3 || n.nodeName === "WBR") own += n.textContent || ""; }
      return { site: r.getAttribute("data-site"), shown: own, via: via ? via.textContent : null };
    }));
  }

  // The header's capacity and the device the page opened on.
  if (out.ready) {
    out.header = await page.evaluate(() => {
      const c = document.querySelector("[data-testid=capacity]");
      return { capacity: c ? c.textContent : null, device: window.memlens.device };
    });
  }

  // What pins the stranded bytes at the moment the state view opened on: the rows and the
  // reading as drawn.
  if (out.ready) {
    out.pinners = await page.evaluate(() => {
      const p = document.querySelector("[data-testid=pinners]");
      return {
        moment: window.memlens.moment,
        shown: p ? {
          bytes: Number(p.getAttribute("data-bytes")),
          rows: [...p.querySelectorAll("[data-testid=pinner]")].map((r) => ({
            site: r.getAttribute("data-site"), sole: Number(r.getAttribute("data-sole")),
            shared: Number(r.getAttribute("data-shared")), cells: [...r.children].map((c) => c.textContent),
            visible: r.getBoundingClientRect().height > 0,
          })),
          words: [...p.querySelectorAll("[data-testid=pinners-words] li")].map((l) => l.textContent),
        } : null,
      };
    });
  }

  // Every judgement line the page shows (leaks, each kind of growth, categories, capacity):
  // its test id, state(s) and text.
  if (out.ready) {
    out.judgements = await page.evaluate(() => [...document.querySelectorAll("[data-testid$=judgement], [data-testid=leaks-kinds]")].map((e) => ({
      testid: e.getAttribute("data-testid"), state: e.getAttribute("data-state"),
      leak: e.getAttribute("data-leak"), retained_graph: e.getAttribute("data-retained-graph"), text: e.textContent,
    })));
  }

  // The top row of memory alive before the trace with no stack: its tooltip, and what it
  // shows when expanded (the evidence, not an empty stack).
  const pretraceRow = () => [...document.querySelectorAll("#top tr.row")]
    .find((r) => (r.getAttribute("data-site") || "").startsWith("<before trace, no stack>"));
  if (out.ready) {
    const found = await page.evaluate(`(${pretraceRow})() ? true : false`);
    if (found) {
      const site = await page.evaluate(`(() => { const r = (${pretraceRow})(); r.scrollIntoView(); r.click(); return r.getAttribute("data-site"); })()`);
      out.pretrace = await page.evaluate(`(() => {
        const r = (${pretraceRow})();
        const next = r && r.nextElementSibling;
        return { site: ${JSON.stringify(site)}, title: r ? r.querySelector("td.site").getAttribute("title") : null,
                 details: next && next.classList.contains("stack-row") ? next.innerText : null };
      })()`);
    }
  }

  if (out.ready && probe.query !== null && (await page.locator("#flame-search").count())) {
    await page.fill("#flame-search", probe.query);
    out.flame_search = await page.evaluate((query) => ({
      query,
      text: document.getElementById("flame-match").textContent,
      match: window.memlens.flameMatch,
      flame_nodes: window.memlens.drawn.flame_nodes,
    }), probe.query);
  }

  // The lines panel of the moment shown, then of the last moment of the selector (the panel
  // follows it): each row's cells and data-bytes, the hot files' source lines, or the hint.
  const linesShown = () => page.evaluate(() => {
    const s = document.getElementById("lines");
    if (!s) return null;
    const hint = s.querySelector("[data-testid=lines-source-hint]");
    return {
      moment: window.memlens.moment,
      rows: [...s.querySelectorAll("[data-testid=line-row]")].map((r) => ({
        file: r.getAttribute("data-file"), line: Number(r.getAttribute("data-line")),
        cells: [...r.children].map((c) => c.textContent), bytes: [...r.children].map((c) => c.getAttribute("data-bytes")),
        visible: r.getBoundingClientRect().height > 0,
      })),
      hint: hint ? hint.textContent : null,
      files: [...s.querySelectorAll("[data-testid=source-file]")].map((f) => ({
        file: f.getAttribute("data-file"),
        lines: [...f.querySelectorAll("[data-testid=source-line]")].map((r) => ({
          line: Number(r.getAttribute("data-line")), self: Number(r.getAttribute("data-self")), total: Number(r.getAttribute("data-total")),
          hot: r.classList.contains("hot"), cells: [...r.children].map((c) => c.textContent),
        })),
      })),
    };
  });
  if (out.ready) {
    out.lines = await linesShown();
    const last = await page.evaluate(() => {
      const sel = document.getElementById("moment-select");
      if (!sel || sel.options.length < 2) return null;
      sel.value = sel.options[sel.options.length - 1].value;
      sel.dispatchEvent(new Event("change"));
      return sel.value;
    });
    out.lines_after = last === null ? out.lines : await linesShown();
  }

  const m1 = await memlens(page);
  out.memlens_errors = m1 ? m1.errors : [];
  if (screenshot) {
    await page.mouse.move(0, 0);
    if (sectionId) await page.locator("#" + sectionId).screenshot({ path: screenshot });
    else await page.screenshot({ path: screenshot, fullPage: true });
  }
  await browser.close();
} catch (e) {
  process.stderr.write("driver failure: " + ((e && e.stack) || e) + "\n");
  if (browser) await browser.close().catch(() => {});
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(2);
}
process.stdout.write(JSON.stringify(out) + "\n");
