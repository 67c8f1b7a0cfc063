// Checks that a memlens page paints every live byte: for each window asked, reads the pixels
// of the plot canvas (#timeline-plot) and compares each column with the live bytes of the
// events it covers, taken from `memlens timeline --points 0 --format csv` (not from the page).
// Served windows (http URLs) are reached through `memlens.zoom`; in those holding every event,
// each alloc event is hovered and its tooltip must name it.
//
//   node tests/browser/check_paint.mjs MANIFEST.json
//
// MANIFEST: [{"name", "url", "csv", "zooms": [[first, last], ...], "whole": true, "hover": true}]
// ("whole": check each device's page as it opens, before any zoom; every device of the CSV
// is checked, selected as the device selector does). Prints one JSON object per entry, one
// per line: {name, ready, errors, windows: [{device, first, last, columns, checked, bad, examples,
// zoom_ms, hover: {checked, failed, examples}}]}. It asserts nothing itself. Exit 2 when the
// driver failed. CHROMIUM overrides the browser (default /usr/bin/chromium).
import { launch } from "./browser.mjs";
import { readFileSync } from "node:fs";

const manifest = JSON.parse(readFileSync(process.argv[2], "utf8"));
// Vertical tolerance in rows, and how many columns each side a column's events are widened by
// (a column shows the highest sample overlapping it; a sample holds until the next one).
const ROWS = 2, WIDEN = 2;

function devicesOf(csvPath) {
  const lines = readFileSync(csvPath, "utf8").split("\n");
  const di = lines[0].split(",").indexOf("device");
  const out = new Set();
  for (let k = 1; k < lines.length; k++) if (lines[k]) out.add(Number(lines[k].split(",")[di]));
  return [...out].sort((a, b) => a - b);
}

function liveOf(csvPath, device) {
  const lines = readFileSync(csvPath, "utf8").split("\n");
  const head = lines[0].split(",");
  const di = head.indexOf("device"), ei = head.indexOf("event_index"), li = head.indexOf("live_requested_bytes");
  let max = -1;
  const rows = [];
  for (let k = 1; k < lines.length; k++) {
    if (!lines[k]) continue;
    const f = lines[k].split(",");
    if (Number(f[di]) !== device) continue;
    const e = Number(f[ei]);
    rows.push([e, Number(f[li])]);
    if (e > max) max = e;
  }
  const live = new Float64Array(max + 2).fill(NaN); // live[e + 1]: the state after event e
  for (const [e, v] of rows) live[e + 1] = v;
  return live;
}

async function readColumns(page) {
  return page.evaluate(() => {
    const p = window.memlens.plot;
    const c = document.getElementById("timeline-plot");
    if (!p || !c) return null;
    const dpr = window.devicePixelRatio || 1;
    const x = Math.round(p.left * dpr), y = Math.round(p.top * dpr);
    const w = Math.round((p.left + p.width) * dpr) - x, h = Math.round((p.top + p.height) * dpr) - y;
    const d = c.getContext("2d").getImageData(x, y, w, h).data;
    const top = new Array(w).fill(-1), count = new Array(w).fill(0);
    for (let col = 0; col < w; col++) {
      for (let r = 0; r < h; r++) {
        if (d[(r * w + col) * 4 + 3] > 0) { if (top[col] < 0) top[col] = r; count[col]++; }
      }
    }
    return { plot: { ...p }, w: w, h: h, top: top, count: count };
  });
}

function checkColumns(cols, live) {
  const { plot, w, h } = cols;
  const first = plot.first_event, last = plot.last_event;
  const span = (last - first + 1) / w;
  const rowsOf = (v) => (v * h) / plot.y_max_bytes;
  let bad = 0, checked = 0;
  const examples = [];
  for (let c = 0; c < w; c++) {
    const ea = Math.max(first, Math.floor(first + (c - WIDEN) * span));
    const eb = Math.min(last, Math.ceil(first + (c + 1 + WIDEN) * span) - 1);
    let lo = Infinity, hi = -Infinity;
    for (let e = ea; e <= eb; e++) {
      const v = live[e + 1];
      if (Number.isNaN(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (lo === Infinity) continue;
    checked++;
    const painted = cols.top[c] < 0 ? 0 : h - cols.top[c];
    const holes = painted - cols.count[c];
    const ok = holes === 0 && painted >= rowsOf(lo) - ROWS && painted <= rowsOf(hi) + ROWS;
    if (!ok) {
      bad++;
      if (examples.length < 5) examples.push({ column: c, events: [ea, eb], painted_rows: painted, holes: holes, expected_rows: [rowsOf(lo), rowsOf(hi)], live: [lo, hi] });
    }
  }
  return { first, last, columns: w, rows: h, checked, bad, examples };
}

async function hoverEvents(page, cols) {
  const ev = await page.evaluate(() => window.memlens.windowEvents());
  if (!ev) return null;
  const { plot } = cols;
  const box = await page.locator("#timeline-plot").boundingBox();
  const n = plot.last_event - plot.first_event + 1;
  let checked = 0, failed = 0;
  const examples = [];
  for (let k = 0; k < ev.index.length; k++) {
    if (ev.action[k] !== "alloc") continue;
    const e = ev.index[k];
    // the pixel column whose centre lies in event e (the page names the event at a column's centre)
    const c = Math.floor(((e - plot.first_event + 0.5) * plot.width) / n);
    const x = box.x + plot.left + c + 0.5;
    const y = box.y + plot.top + plot.height - 1.5;
    await page.mouse.move(x, y);
    const tip = await page.evaluate(() => {
      const t = document.getElementById("tooltip");
      if (!t || t.hidden) return null;
      const d = t.querySelector("[data-event]");
      return { event: d ? Number(d.getAttribute("data-event")) : null, text: d ? d.innerText : t.innerText };
    });
    checked++;
    const want = Number(ev.size[k]).toLocaleString("en-US") + " bytes";
    if (!tip || tip.event !== e || !tip.text.includes(want)) {
      failed++;
      if (examples.length < 5) examples.push({ event: e, want: want, got: tip });
    }
  }
  return { checked, failed, examples };
}

let browser;
try {
  browser = await launch();
  for (const item of manifest) {
    const out = { name: item.name, ready: false, errors: [], windows: [] };
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
    page.on("pageerror", (e) => out.errors.push(String((e && e.message) || e)));
    page.on("console", (m) => { if (m.type() === "error") out.errors.push(m.text()); });
    try {
      await page.goto(item.url, { waitUntil: "commit" });
      await page.waitForFunction(() => window.memlens && window.memlens.ready === true, null, { timeout: 60000 });
      out.ready = true;
      for (const device of devicesOf(item.csv)) {
        if (!(await page.evaluate((d) => window.memlens.selectDevice(d), device))) {
          out.errors.push("the page has no device " + device);
          continue;
        }
        if (!(await page.locator("#timeline-plot").count())) {
          out.errors.push("device " + device + " has a trace but no #timeline-plot");
          continue;
        }
        const live = liveOf(item.csv, device);
        await page.locator("#timeline-plot").scrollIntoViewIfNeeded();
        if (item.whole !== false) {
          const cols = await readColumns(page);
          if (cols) out.windows.push({ device, ...checkColumns(cols, live) });
        }
        for (const [a, b] of item.zooms || []) {
          const t0 = Date.now();
          await page.evaluate(([x, y]) => window.memlens.zoom(x, y), [a, b]);
          const zoom_ms = Date.now() - t0;
          const cols = await readColumns(page);
          const r = { device, ...checkColumns(cols, live) };
          r.asked = [a, b];
          r.zoom_ms = zoom_ms;
          if (item.hover) r.hover = await hoverEvents(page, cols);
          out.windows.push(r);
        }
      }
      out.errors.push(...(await page.evaluate(() => window.memlens.errors.slice())));
    } catch (e) {
      out.errors.push("driver: " + String((e && e.message) || e));
    }
    await page.close();
    process.stdout.write(JSON.stringify(out) + "\n");
  }
  await browser.close();
} catch (e) {
  process.stderr.write("driver failure: " + ((e && e.stack) || e) + "\n");
  if (browser) await browser.close().catch(() => {});
  process.exit(2);
}
