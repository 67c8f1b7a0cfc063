// What the page of several runs (`memlens report A B ...`) shows, read back from the page the
// way a person uses it: the runs table, the stacked timeline by its pixels, a click on the
// plot and the moment panel it opens, the difference mode, the diff tables, and (many runs)
// the outlier row and the view a click on a run opens. It asserts nothing itself: the Rust
// test (tests/it/compare_page.rs) compares what it prints with `memlens report --format json`.
//
//   node tests/browser/check_runs.mjs PAGE.html [SCREENSHOT.png]
//
// Prints one JSON object: {ready, errors, headings, runs: [{run, peak_bytes}], outlier_rows,
// stacked: [{run, height, dpr, live_top, reserved_top}], scale_bytes, axes, clicked: {moment,
// label, only_base, only_cand, common_base, common_cand, sites: [[site, delta]]} | null,
// difference_bars, categories: [[name, delta]], settings: [key], steps_marked, observations,
// run_view: {heading, sites: [[site, bytes]]} | null}. live_top / reserved_top: the most rows
// (device pixels, from the bottom) any column paints in the run's colour / the reserved line's.
import { launch } from "./browser.mjs";
import { pathToFileURL } from "node:url";

const out = { ready: false, errors: [], headings: [], runs: [], outlier_rows: [], stacked: [], scale_bytes: null, axes: [],
  stacked_own: [], clicked: null, difference_bars: null, categories: [], settings: [], steps_marked: [], observations: [], run_view: null };
const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("console", (m) => { if (m.type() === "error") out.errors.push(m.text()); });
  page.on("pageerror", (e) => out.errors.push(String(e)));
  await page.goto(pathToFileURL(process.argv[2]).href);
  await page.waitForFunction(() => window.memlens && window.memlens.ready, null, { timeout: 60000 });
  out.ready = true;
  const bytesOf = (sel) => page.$$eval(sel, (tds) => tds.map((td) => Number(td.getAttribute("data-bytes"))));
  Object.assign(out, await page.evaluate(() => ({
    errors: window.memlens.errors.slice(),
    headings: [...document.querySelectorAll("section h2")].map((h) => h.innerText),
    axes: [...document.querySelectorAll("button[data-axis]")].map((b) => b.getAttribute("data-axis")),
    runs: [...document.querySelectorAll("#runs tr[data-run]")].map((tr) => ({ run: Number(tr.getAttribute("data-run")), peak_bytes: Number(tr.querySelector("td.peak").getAttribute("data-bytes")) })),
    outlier_rows: [...document.querySelectorAll("#runs tr.outlier")].map((tr) => Number(tr.getAttribute("data-run"))),
    categories: [...document.querySelectorAll(".diff-categories tr[data-category]")].map((tr) => [tr.getAttribute("data-category"), Number(tr.querySelectorAll("td")[3].getAttribute("data-bytes"))]),
    settings: [...document.querySelectorAll(".settings tr[data-setting]")].map((tr) => tr.getAttribute("data-setting")),
    steps_marked: [...document.querySelectorAll("#diff tr.current[data-step]")].map((tr) => Number(tr.getAttribute("data-step"))),
    observations: [...document.querySelectorAll("#observations li")].map((li) => li.innerText),
  })));
  // The stacked layout: each run on its canvas, the live area in its colour, reserved a line.
  const drawn = await page.evaluate(() => !!window.memlens.plot);
  if (drawn) {
    await page.click("button[data-layout=stacked]");
    await page.click("button[data-axis=event]");
  }
  const measure = () => page.evaluate(() => {
    const hexRgb = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
    const near = (d, j, c) => Math.abs(d[j] - c[0]) < 8 && Math.abs(d[j + 1] - c[1]) < 8 && Math.abs(d[j + 2] - c[2]) < 8 && d[j + 3] > 200;
    const reserved = hexRgb("#1f2937");
    if (!window.memlens.plot) return { scale: null, rows: [] };
    return {
      scale: window.memlens.plot.scale_bytes,
      rows: [...document.querySelectorAll("canvas.runs-canvas[data-run]")].map((c) => {
        const i = Number(c.getAttribute("data-run"));
        const colour = hexRgb(document.querySelector("#runs tr[data-run='" + i + "'] .sw").style.background.replace(/rgb\((\d+), (\d+), (\d+)\)/, (_, r, g, b) => "#" + [r, g, b].map((x) => Number(x).toString(16).padStart(2, "0")).join("")));
        const w = c.width, h = c.height, d = c.getContext("2d").getImageData(0, 0, w, h).data;
        let lt = 0, rt = 0;
        for (let x = 0; x < w; x++) {
          for (let y = 0; y < h; y++) { if (near(d, (y * w + x) * 4, colour)) { lt = Math.max(lt, h - y); break; } }
          for (let y = 0; y < h; y++) { if (near(d, (y * w + x) * 4, reserved)) { rt = Math.max(rt, h - y); break; } }
        }
        const scale = window.memlens.plot.canvases.find((x) => x.runs.length === 1 && x.runs[0] === i).scale_bytes;
        return { run: i, height: h, dpr: window.devicePixelRatio || 1, live_top: lt, reserved_top: rt, scale_bytes: scale };
      }),
    };
  });
  const stacked = await measure();
  out.stacked = stacked.rows;
  out.scale_bytes = stacked.scale;
  // Each run on its own scale: its canvas's full height is its own highest point.
  if (drawn) {
    await page.click("button[data-scale=own]");
    out.stacked_own = (await measure()).rows;
    await page.click("button[data-scale=shared]");
  }
  const pair = await page.evaluate(() => !!document.getElementById("moment"));
  out.no_moments = await page.evaluate(() => !!document.getElementById("no-moments"));
  out.no_timeline = await page.evaluate(() => !!document.getElementById("no-timeline"));
  if (pair && drawn && !out.no_moments) {
    // A click on the plot at an event moment: both live sets there.
    await page.click("button[data-layout=overlaid]");
    const k = await page.evaluate(() => {
      const d = JSON.parse(document.getElementById("memlens-data").textContent);
      const ms = d.pair.moments.map((m, i) => [m, i]).filter(([m]) => m.kind === "event");
      return ms.length ? ms[Math.floor(ms.length * 2 / 3)][1] : null;
    });
    if (k != null) {
      const p = await page.evaluate((k) => window.memlens.momentPoint(k), k);
      await page.mouse.click(p.x + 0.5, p.y);
      out.clicked = await page.evaluate(() => ({
        moment: window.memlens.moment,
        label: document.querySelector("#moment h2").innerText,
        only_base: Number(document.querySelector("#only-totals [data-only=base] [data-bytes]").getAttribute("data-bytes")),
        only_cand: Number(document.querySelector("#only-totals [data-only=cand] [data-bytes]").getAttribute("data-bytes")),
        common_base: Number(document.querySelectorAll("#only-totals [data-only=both] [data-bytes]")[0].getAttribute("data-bytes")),
        common_cand: Number(document.querySelectorAll("#only-totals [data-only=both] [data-bytes]")[1].getAttribute("data-bytes")),
        sites: [...document.querySelectorAll("#moment tr[data-site]")].map((tr) => [tr.getAttribute("data-site"), Number(tr.querySelectorAll("td")[3].getAttribute("data-bytes"))]),
      }));
    }
    await page.click("button[data-mode=difference]");
    out.difference_bars = await page.evaluate(() => window.memlens.plot.canvases[0].bars);
  } else if (!pair) {
    const first = await page.evaluate(() => Number(document.querySelector("#runs tr[data-run]:not(.outlier)").getAttribute("data-run")));
    await page.click("#runs tr[data-run='" + first + "']");
    out.run_view = await page.evaluate(() => ({
      run: window.memlens.run,
      heading: document.querySelector("#run h2").innerText,
      sites: [...document.querySelectorAll("#run tr[data-site]")].map((tr) => [tr.getAttribute("data-site"), Number(tr.querySelector("td").getAttribute("data-bytes"))]),
    }));
  }
  if (process.argv[3]) await page.screenshot({ path: process.argv[3], fullPage: true });
  out.errors.push(...(await page.evaluate(() => window.memlens.errors)).filter((e) => !out.errors.includes(e)));
} catch (e) {
  out.errors.push("driver: " + String(e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
