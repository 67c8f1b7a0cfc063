// What a memlens page shows of the 2026 fields (issue 39): annotations and metadata in the
// top rows, the by-metadata table, the block and band hovers; the device labels; and the
// private-pools panel read back from its pixels. It asserts nothing itself: the Rust test
// (tests/it/page2026.rs) compares what it prints with `memlens report --format json`.
//
//   node tests/browser/check_notes.mjs PAGE.html
//
// Prints one JSON object: {ready, errors, text_has_cuda, device_mentions (`xpu:1`, `device 0`,
// each once), device_options, headings,
// row_annotations: {site: [text]}, metadata_rows: [[label, bytes]], block_tips: [{row, block,
// tooltip}], band_tips: [{band, tooltip}], pools: [{pool, width, height, active_top,
// reserved_top}]} where active_top / reserved_top are the most rows (device pixels, from the
// bottom) any column paints in the active colour / the reserved line's colour.
import { launch } from "./browser.mjs";
import { pathToFileURL } from "node:url";

const out = { ready: false, errors: [], text_has_cuda: null, device_mentions: [], device_options: [], headings: [],
  row_annotations: {}, metadata_rows: [], block_tips: [], band_tips: [], pools: [] };
const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(m.text()); });
  page.on("pageerror", (e) => out.errors.push(String(e)));
  await page.goto(pathToFileURL(process.argv[2]).href);
  await page.waitForFunction(() => window.memlens && window.memlens.ready, null, { timeout: 60000 });
  out.ready = true;
  Object.assign(out, await page.evaluate(() => {
    const rows = {};
    for (const tr of document.querySelectorAll("#top tr.row")) {
      const a = [...tr.querySelectorAll("[data-testid=row-annotation]")].map((e) => e.textContent);
      if (a.length) rows[tr.getAttribute("data-site")] = a;
    }
    return {
      text_has_cuda: document.body.innerText.includes("cuda:"),
      device_mentions: [...new Set(document.body.innerText.match(/\b(cuda|xpu|npu|mlu|musa):\d+|\bdevice \d+/g) || [])].sort(),
      device_options: [...document.querySelectorAll("select option")].map((o) => o.textContent).filter((t) => /\d$/.test(t)),
      headings: [...document.querySelectorAll("section h2")].map((h) => h.innerText),
      row_annotations: rows,
      metadata_rows: [...document.querySelectorAll("#by-metadata tbody tr[data-metadata]")].map((tr) => [tr.getAttribute("data-metadata"), Number(tr.querySelector("td.num").getAttribute("title").replace(/[^0-9]/g, ""))]),
    };
  }));
  const data = await page.evaluate(() => JSON.parse(document.getElementById("memlens-data").textContent));
  const dev = data.devices[0];
  const tip = () => page.evaluate(() => { const t = document.getElementById("tooltip"); return t && !t.hidden ? t.innerText : null; });
  // Each block with a note in the moment shown first.
  const m = dev && dev.moments[0];
  if (m) {
    for (const [r, sg] of m.state.segments.entries()) {
      for (const [k] of sg.block_notes || []) {
        const p = await page.evaluate(([r, k]) => window.memlens.blockPoint(r, k), [r, k]);
        let tooltip = null;
        if (p) { await page.mouse.move(p.x, p.y); tooltip = await tip(); }
        out.block_tips.push({ row: r, block: k, tooltip });
      }
    }
  }
  // Each band with a note that is tall enough to point at.
  if (dev && dev.timeline) {
    for (const [i, b] of dev.timeline.bands.entries()) {
      if (!b.note) continue;
      const p = await page.evaluate((i) => window.memlens.bandPoint(i), i);
      if (!p) continue;
      await page.mouse.move(p.x, p.y);
      out.band_tips.push({ band: i, tooltip: await tip() });
    }
  }
  await page.mouse.move(0, 0);
  out.pools = await page.evaluate(() => {
    const hexRgb = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
    const near = (d, j, c) => Math.abs(d[j] - c[0]) < 8 && Math.abs(d[j + 1] - c[1]) < 8 && Math.abs(d[j + 2] - c[2]) < 8 && d[j + 3] > 200;
    const active = hexRgb("#59a14f"), reserved = hexRgb("#1f2937");
    return [...document.querySelectorAll("canvas.pool-canvas")].map((c) => {
      const w = c.width, h = c.height, d = c.getContext("2d").getImageData(0, 0, w, h).data;
      let at = 0, rt = 0;
      for (let x = 0; x < w; x++) {
        for (let y = 0; y < h; y++) {
          const j = (y * w + x) * 4;
          if (near(d, j, active)) { at = Math.max(at, h - y); break; }
        }
        for (let y = 0; y < h; y++) {
          const j = (y * w + x) * 4;
          if (near(d, j, reserved)) { rt = Math.max(rt, h - y); break; }
        }
      }
      return { pool: Number(c.getAttribute("data-pool")), width: w, height: h, active_top: at, reserved_top: rt, dpr: window.devicePixelRatio || 1 };
    });
  });
} catch (e) {
  out.errors.push("driver: " + String(e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
