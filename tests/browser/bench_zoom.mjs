// Times the page of a served snapshot: first page ready, then zooms through
// `memlens.zoom(first, last)` (fetched from the server and drawn). Used by scripts/bench_serve,
// which prints the table; this prints one JSON object.
//
//   node tests/browser/bench_zoom.mjs URL EVENTS [ZOOMS]
//
// The windows are deterministic: ZOOMS (default 30) windows of widths from a few hundred
// events to half the trace, spread over it. CHROMIUM overrides the browser.
import { launch } from "./browser.mjs";

const [url, eventsArg, zoomsArg] = process.argv.slice(2);
const events = Number(eventsArg), zooms = Number(zoomsArg || 30);
const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
const t0 = Date.now();
await page.goto(url, { waitUntil: "commit" });
await page.waitForFunction(() => window.memlens && window.memlens.ready === true, null, { timeout: 120000 });
const ready_ms = Date.now() - t0;
const times = [];
let x = 12345;
const rand = () => { x = (Math.imul(x, 1103515245) + 12345) >>> 0; return x / 4294967296; };
for (let k = 0; k < zooms; k++) {
  const width = Math.max(200, Math.round(Math.pow(events / 2 / 200, k / Math.max(1, zooms - 1)) * 200));
  const first = Math.floor(rand() * (events - width));
  const t = await page.evaluate(async ([a, b]) => {
    const s = performance.now();
    await window.memlens.zoom(a, b);
    return performance.now() - s;
  }, [first, first + width - 1]);
  times.push({ first, width, ms: Math.round(t * 10) / 10 });
}
await browser.close();
process.stdout.write(JSON.stringify({ ready_ms, times, errors }) + "\n");
