"use strict";
// memlens report: draws the JSON in #memlens-data. Everything shown comes from the analyses;
// this script only decodes the compact arrays, lays them out, formats and hit-tests.
(function () {
  const ML = (window.memlens = {
    ready: false,
    errors: [],
    drawn: { timeline_bands: 0, state_blocks: 0, flame_nodes: 0 },
    view: { first: null, last: null },
    pinned: null,
    bandPoint: function () { return null; },
    blockPoint: function () { return null; },
    device: null,
    moment: null,
    flameMatch: null,
    readyMs: null,
    // The moment the state, top and flame sections show: {name, event_index, live_bytes}.
    momentShown: null,
    // The plot after every draw: CSS pixels of #timeline-plot, the bytes at its top edge, the
    // events at its left and right edges (event e spans [e, e + 1) in x).
    plot: null,
  });
  const started = performance.now();

  // ---------------------------------------------------------------- errors
  function recordError(err) {
    let msg = err && err.stack ? String(err.stack).split("\n").slice(0, 4).join(" | ") : String((err && err.message) || err);
    ML.errors.push(msg);
    try {
      console.error("memlens report: " + msg);
      let box = document.getElementById("errors");
      if (!box) {
        box = el("div", { id: "errors", class: "errors", role: "alert" }, el("strong", null, "This page hit an error while drawing; some sections may be incomplete."));
        document.body.insertBefore(box, document.body.firstChild);
      }
      box.appendChild(el("div", { class: "mono" }, msg));
    } catch (_) { /* nothing more to do */ }
  }
  window.addEventListener("error", (e) => recordError(e.error || e.message));
  window.addEventListener("unhandledrejection", (e) => recordError(e.reason));
  function guard(fn) {
    return function () {
      try { return fn.apply(this, arguments); } catch (e) { recordError(e); }
    };
  }

  // ---------------------------------------------------------------- helpers
  function el(tag, attrs) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        const v = attrs[k];
        if (v == null || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = v;
        // Through the CSSOM: the page's policy allows no style attribute.
        else if (k === "style") e.style.cssText = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), guard(v));
        else e.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (let i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }
  function append(parent, kid) {
    if (kid == null || kid === false) return;
    if (Array.isArray(kid)) { for (const k of kid) append(parent, k); return; }
    parent.appendChild(typeof kid === "object" ? kid : document.createTextNode(String(kid)));
  }
  function fill(node) {
    node.textContent = "";
    for (let i = 1; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }
  const UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  function fmtBytes(n) {
    if (n == null) return "unknown";
    const neg = n < 0;
    let v = Math.abs(n);
    if (v < 1024) return (neg ? "-" : "") + v + " B";
    let u = -1;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return (neg ? "-" : "") + v.toFixed(2) + " " + UNITS[u];
  }
  function fmtAxis(n) {
    return fmtBytes(n).replace(/\.00 /, " ").replace(/(\.\d)0 /, "$1 ");
  }
  function fmtInt(n) { return n == null ? "–" : Number(n).toLocaleString("en-US"); }
  function fmtPct(x) { return x == null ? "–" : (x * 100).toFixed(x < 0.001 && x > 0 ? 3 : 1) + "%"; }
  function hex(a) { return a == null ? "–" : "0x" + Number(a).toString(16); }
  function fmtRel(us, origin) {
    if (us == null || origin == null) return null;
    const d = us - origin;
    if (Math.abs(d) >= 10e6) return "t+" + (d / 1e6).toFixed(3) + " s";
    return "t+" + (d / 1e3).toFixed(3) + " ms";
  }
  // Text with `code` spans, as the analyses write commands and names.
  function rich(t) {
    const parts = String(t).split("`");
    if (parts.length < 3) return String(t);
    return parts.map((x, i) => (i % 2 && i < parts.length - 1 ? el("code", null, x) : (i % 2 ? "`" + x : x)));
  }
  // A path or site with break opportunities after "/" and ":".
  // A site or context label as the text reports show it (the snapshot's root and library
  // prefixes stripped, computed by memlens: DATA.shown_sites), else as recorded.
  function shownSite(t) { return (DATA.shown_sites && Object.prototype.hasOwnProperty.call(DATA.shown_sites, t)) ? DATA.shown_sites[t] : t; }
  function path(t) {
    const out = [];
    for (const piece of String(t).split(/(?<=[/:])/)) { out.push(piece); out.push(el("wbr")); }
    out.pop();
    return out;
  }
  function bytesCell(n) { return el("td", { class: "num", title: fmtInt(n) + " bytes" }, fmtBytes(n)); }
  function shareCell(x) {
    return el("td", { class: "num share" }, el("span", { class: "track" }, el("span", { class: "bar", style: "width:" + Math.max(0, Math.min(100, x * 100)).toFixed(1) + "%" })), el("span", { class: "pct" }, fmtPct(x)));
  }
  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  const PALETTE = ["#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#8cd17d", "#b6992d", "#f1ce63", "#499894",
    "#86bcb6", "#e15759", "#ff9d9a", "#d37295", "#fabfd2", "#b07aa1", "#d4a6c8", "#9d7660", "#d7b5a6"];
  function siteColor(site) { return PALETTE[hash(site) % PALETTE.length]; }
  const FLAME_HUE = { user: [30, 72, 66], library: [172, 32, 60], torch: [352, 40, 75], cpp: [215, 24, 74] };
  function frameColor(f) {
    if (f < 0) return "#d5d9de";
    const fr = DATA.frames[f];
    const base = FLAME_HUE[fr.kind] || [0, 0, 75];
    const j = (hash(fr.name) % 13) - 6;
    return "hsl(" + (base[0] + j) + "," + base[1] + "%," + (base[2] + j * 0.8) + "%)";
  }
  function niceStep(raw, binary) {
    if (!(raw > 0)) return 1;
    if (binary && raw >= 1024) {
      let unit = 1;
      while (unit * 1024 <= raw) unit *= 1024;
      const m = raw / unit;
      for (const c of [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1024]) if (c >= m) return c * unit;
      return 1024 * unit;
    }
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function setupCanvas(canvas, w, h) {
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = w + "px";
    canvas.style.height = h + "px";
    canvas.width = Math.max(1, Math.round(w * dpr));
    canvas.height = Math.max(1, Math.round(h * dpr));
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }
  function fitText(ctx, text, w) {
    if (ctx.measureText(text).width <= w) return text;
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + "…").width <= w) lo = mid; else hi = mid - 1;
    }
    return lo > 0 ? text.slice(0, lo) + "…" : "";
  }
  function lowerBound(arr, v) { // first index with arr[i] > v, minus one: last index with arr[i] <= v
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] <= v) lo = mid + 1; else hi = mid; }
    return lo - 1;
  }

  // ---------------------------------------------------------------- data
  const DATA = JSON.parse(document.getElementById("memlens-data").textContent);
  // A page served by `memlens serve`: the files served and which one this is (null: static).
  const SERVE = (function () { const e = document.getElementById("memlens-serve"); return e ? JSON.parse(e.textContent) : null; })();
  const TOKEN = SERVE ? new URLSearchParams(location.search).get("token") : null;
  // The page opens on the device Rust chose (the first OOM's, else the highest peak's).
  const S = { dev: Math.max(0, DATA.devices.findIndex((d) => d.device === DATA.first_device)), moment: 0, showCpp: true, showTorch: true, pinned: null, tl: null };
  const tooltip = el("div", { id: "tooltip", role: "tooltip", hidden: true });

  function devPage() { return DATA.devices[S.dev]; }
  // A device by the type its file names (summary.device_type: "xpu:1"), else "device 1":
  // the format has no key for it, so CUDA is never assumed.
  function devName(d) { const t = DATA.summary && DATA.summary.device_type; return t ? t.name + ":" + d : "device " + d; }
  function devId() { const d = devPage(); return d ? d.device : null; }
  function moment() { const d = devPage(); return d ? d.moments[S.moment] : null; }
  function frameShown(f) {
    const k = DATA.frames[f].kind;
    if (k === "noise") return false;
    if (k === "cpp") return S.showCpp;
    if (k === "torch") return S.showTorch;
    return true;
  }
  function flameView() { return S.showCpp ? (S.showTorch ? "all" : "no_torch") : (S.showTorch ? "no_cpp" : "user"); }
  const VIEW_NAMES = { all: "all frames", no_cpp: "without C++ frames", no_torch: "without PyTorch-internal frames", user: "Python frames outside torch only" };
  function stackList(si) {
    const all = (si != null && DATA.stacks[si]) || [];
    const shown = all.filter(frameShown);
    if (!all.length) return el("div", { class: "stack muted" }, "<no frames recorded>");
    const hidden = all.length - shown.length;
    return el("div", { class: "stack" },
      el("div", { class: "stack-head muted" }, "stack, innermost first" + (hidden ? " (" + hidden + " frame" + (hidden > 1 ? "s" : "") + " hidden)" : "")),
      el("ol", null, shown.map((f) => {
        const fr = DATA.frames[f];
        return el("li", { class: "k-" + fr.kind, title: fr.file + (fr.line >= 0 ? ":" + fr.line : "") }, fr.label);
      })));
  }
  function momentLabel(m) {
    const n = m.name;
    if (n === "peak") return "Peak";
    if (n === "end") return devPage().timeline ? "End of trace" : "Final state";
    if (n === "at") return "--at moment";
    if (n === "window peak") return "Peak of the window shown";
    if (n.startsWith("oom:")) return "OOM " + n.slice(4);
    return n;
  }
  function absentFor(device) { return DATA.absent.filter((a) => a.device === device); }

  // ---------------------------------------------------------------- tooltip
  function showTip(content, cx, cy) {
    fill(tooltip, content);
    tooltip.hidden = false;
    const r = tooltip.getBoundingClientRect();
    let x = cx + 16, y = cy + 16;
    if (x + r.width > window.innerWidth - 8) x = Math.max(8, cx - r.width - 16);
    if (y + r.height > window.innerHeight - 8) y = Math.max(8, window.innerHeight - r.height - 8);
    tooltip.style.left = x + "px";
    tooltip.style.top = y + "px";
  }
  function hideTip() { tooltip.hidden = true; }
  function kv(rows) {
    return el("dl", { class: "kv" }, rows.filter(Boolean).map(([k, v]) => [el("dt", null, k), el("dd", null, v)]));
  }

  // ---------------------------------------------------------------- sections
  const sections = {};
  // An allocation's annotations and metadata (page notes), as tooltip rows.
  function noteRows(n) {
    if (!n) return [];
    return (n.annotations || []).map((t) => ["annotated", el("span", { class: "note-text", "data-testid": "annotation" }, t)])
      .concat(n.user_metadata ? [["user metadata", el("span", { class: "mono", "data-testid": "user-metadata" }, n.user_metadata)]] : [])
      .concat(n.internal_metadata ? [["internal metadata", el("span", { class: "mono", "data-testid": "internal-metadata" }, n.internal_metadata)]] : []);
  }
  function section(id, title) {
    const s = el("section", { id: id, class: "card" });
    sections[id] = s;
    return s;
  }
  function heading(title, sub) {
    return el("div", { class: "sec-head" }, el("h2", null, title), sub ? el("span", { class: "sub" }, sub) : null);
  }

  // 1. header
  function renderHeader() {
    const s = sections.header;
    const sum = DATA.summary;
    const devs = sum.devices || [];
    const nav = el("nav", { class: "toc" }, [["oom", "OOM"], ["advice", "What to change"], ["timeline", "Timeline"], ["state", "Allocator state"], ["top", "Top sites"], ["flame", "Flamegraph"], ["leaks", "Leaks"], ["categories", "Categories"], ["summary", "Summary"]]
      .filter(([id]) => id !== "oom" || DATA.oom)
      .map(([id, t]) => el("a", { href: "#" + id }, t)));
    const devTable = el("table", { class: "grid compact" },
      el("thead", null, el("tr", null, el("th", null, "device"), el("th", { class: "num" }, "reserved"), el("th", { class: "num" }, "allocated"), el("th", { class: "num" }, "segments"), el("th", { class: "num" }, "trace entries"))),
      el("tbody", null, devs.map((d) => el("tr", null, el("td", null, devName(d.device)), bytesCell(d.reserved_bytes), bytesCell(d.allocated_bytes), el("td", { class: "num" }, fmtInt(d.segments)), el("td", { class: "num" }, fmtInt(d.trace_entries))))));
    const warnings = (sum.warnings || []).map((w) => el("li", { class: "warn" }, el("span", { class: "tag" }, w.device != null ? devName(w.device) : "file"), " ", el("span", { "data-testid": "warning" }, w.message)));
    const absent = DATA.absent.map((a) => el("li", { class: "absent" }, el("span", { class: "tag" }, a.device != null ? devName(a.device) : "file"), " ", el("span", { "data-testid": "absent" }, a.message)));
    let select = null;
    if (DATA.devices.length > 1) {
      select = el("label", { class: "devsel" }, "Device ",
        el("select", { id: "device-select", onchange: (e) => selectDevice(DATA.devices.findIndex((d) => String(d.device) === e.target.value)) },
          DATA.devices.map((d, i) => el("option", { value: d.device, selected: i === S.dev }, devName(d.device)))),
        el("span", { class: "muted" }, " the sections below show this device"));
    }
    fill(s, 
      el("div", { class: "title-row" },
        el("h1", null, el("span", { class: "brand" }, "memlens"), " report"),
        el("span", { class: "mono file", title: DATA.file }, DATA.file)),
      el("div", { class: "meta" },
        el("span", null, "layout ", el("b", null, DATA.layout)),
        el("span", null, "devices ", el("b", null, String(DATA.devices.length))),
        el("span", { "data-testid": "capacity" }, "capacity ", DATA.capacity_shown
          ? [el("b", { "data-bytes": String(DATA.capacity_shown.bytes) }, fmtBytes(DATA.capacity_shown.bytes)), el("span", { class: "muted" }, " (" + DATA.capacity_shown.source + ")")]
          : el("b", null, "not known (pass --gpu or --capacity)")),
        el("span", null, "memlens ", el("b", null, DATA.memlens_version))),
      devs.length ? devTable : null,
      warnings.length ? el("div", { class: "notes-block" }, el("h3", null, "Data quality"), el("ul", { class: "flags" }, warnings)) : null,
      absent.length ? el("div", { class: "notes-block" }, el("h3", null, "Not shown"), el("ul", { class: "flags" }, absent)) : null,
      nav,
      servedFiles(),
      select);
  }
  // Served with other files: a link to each file's page and to the page of all of them.
  function servedFiles() {
    if (!SERVE || !SERVE.files || SERVE.files.length < 2) return null;
    const href = (path, q) => path + "?" + new URLSearchParams(Object.assign({ token: TOKEN || "" }, q)).toString();
    return el("nav", { class: "toc", id: "served-files" }, el("span", { class: "muted" }, "files served: "),
      SERVE.files.map((f, i) => i === SERVE.file ? el("b", { class: "mono" }, f) : el("a", { class: "mono", href: href("/", { file: String(i) }) }, f)),
      el("a", { href: href("/runs", {}), "data-testid": "runs-link" }, SERVE.files.length === 2 ? "compare the two" : "all runs together"));
  }

  function selectDevice(i) {
    if (i < 0) return;
    S.dev = i;
    S.moment = 0;
    S.pinned = null;
    ML.pinned = null;
    ML.device = devId();
    renderDevice();
  }

  // The one ranked list of what to change at a moment (memlens fit's, the same ids and order
  // as memlens oom's recommendations), with the immaterial fixes apart and the plan.
  const COST_WORDS = { free: "free", speed: "slower", results: "changes results", slower: "slower", changes_results: "changes results" };
  function fixBlock(f, testid) {
    const preds = {};
    ((DATA.oom && DATA.oom.ooms) || []).forEach((o) => { if (o.device === f.device && o.event_index === f.at.event_index) o.recommendations.forEach((r) => { if (r.predicted) preds[r.id] = r.predicted; }); });
    const plan = f.plan;
    return el("div", { "data-testid": testid },
      el("h3", null, "What to change, cheapest first"),
      f.fixes.length ? el("ol", { class: "recs" }, f.fixes.map((x) => el("li", { "data-testid": "fix", "data-id": x.id },
        el("span", { class: "cost c-" + x.cost }, COST_WORDS[x.cost] || x.cost), " ", el("span", { class: "action" }, rich(x.action)),
        el("div", { class: "why" }, (x.for_verdict ? "answers the verdict" : "saves " + fmtBytes(x.saves_bytes) + " → " + fmtBytes(x.peak_after_bytes)) + " · " + x.confidence + " confidence · ", rich(x.evidence)),
        preds[x.id] ? el("div", { class: "why predicted" }, "Predicted, " + preds[x.id].words + ".") : null)))
        : el("p", { "data-testid": "no-fix" }, "No fix that matters applies at this moment."),
      f.immaterial_fixes && f.immaterial_fixes.length ? el("p", { class: "muted", "data-testid": "immaterial" }, "Immaterial (each saves under 1% of the " + fmtBytes(f.demand_bytes) + " to hold): " + f.immaterial_fixes.map((x) => x.id + " (" + fmtBytes(x.saves_bytes) + ")").join(", ")) : null,
      plan ? el("p", { class: "muted" }, plan.fits_now ? "It fits " + fmtBytes(plan.capacity_bytes) + " as it is." : plan.fits
        ? "Plan for " + fmtBytes(plan.capacity_bytes) + " (" + plan.capacity_source + "): " + plan.steps.map((p) => p.id).join(" + ") + " → " + fmtBytes(plan.steps[plan.steps.length - 1].peak_after_bytes) + "."
        : "With every fix it is still " + fmtBytes(plan.short_by_bytes) + " short of " + fmtBytes(plan.target_bytes) + ".")
        : judgementLine(f.capacity, "capacity-judgement", "Capacity: "));
  }

  // What to change on the device shown: at its OOM (the OOM card holds the list), else at its peak.
  function renderAdvice() {
    const s = sections.advice;
    if (!s) return;
    const f = (DATA.advice || []).find((d) => d.device === devId());
    if (!f) { fill(s, heading("What to change", devName(devId())), el("p", { class: "muted" }, "No live memory on this device.")); return; }
    const at = (f.moment === "oom" ? "at its OOM" : "at its " + f.moment) + " (" + (f.at.event_index >= 0 ? "event " + fmtInt(f.at.event_index) + ", " : "") + f.moment_phase.words + "): " + fmtBytes(f.demand_bytes) + " to hold";
    const oomShown = f.moment === "oom" && DATA.oom && sections.oom;
    fill(s, heading("What to change", devName(f.device) + " " + at),
      oomShown ? el("p", { "data-testid": "advice-see-oom" }, "This device ran out of memory: ", el("a", { href: "#oom" }, "the OOM card above"), " lists what to change there, cheapest first.")
        : fixBlock(f, "advice"),
      f.notes.length ? el("ul", { class: "plain muted" }, f.notes.map((t) => el("li", null, rich(t)))) : null);
  }

  // 2. OOM
  function renderOom() {
    const s = sections.oom;
    const rep = DATA.oom;
    if (!rep || !s) return;
    fill(s, heading("Out of memory", rep.ooms.length + " OOM event" + (rep.ooms.length === 1 ? "" : "s") + " in the snapshot"));
    rep.ooms.forEach((o, k) => {
      const dIdx = DATA.devices.findIndex((d) => d.device === o.device);
      const dp = DATA.devices[dIdx];
      const mIdx = dp ? dp.moments.findIndex((m) => m.name.startsWith("oom:") && m.at.event_index === o.event_index) : -1;
      const stat = (label, v, hint) => el("div", { class: "stat" }, el("div", { class: "stat-label" }, label), el("div", { class: "stat-value", title: v != null ? fmtInt(v) + " bytes" : "" }, fmtBytes(v)), hint ? el("div", { class: "stat-hint" }, hint) : null);
      const card = el("div", { class: "oom-card" },
        el("div", { class: "oom-title" },
          el("span", null, "OOM " + (k + 1) + " · " + devName(o.device) + (o.event_index != null ? " · event " + fmtInt(o.event_index) : "") + (o.backend ? " · " + o.backend : "")),
          mIdx >= 0 ? el("button", { class: "link", onclick: () => { if (dIdx !== S.dev) { selectDevice(dIdx); syncDeviceSelect(); } S.moment = mIdx; renderMoment(); sections.state.scrollIntoView({ behavior: "smooth" }); } }, "show the allocator state at this OOM") : null),
        el("div", { class: "verdict", "data-testid": "oom-verdict" },
          el("span", { class: "badge v-" + o.verdict }, o.verdict), " ", el("span", { class: "headline" }, o.headline)),
        el("div", { class: "stats" },
          stat("Tried to allocate", o.requested_bytes, o.request_rounded_bytes != null && o.request_rounded_bytes !== o.requested_bytes ? "request " + fmtBytes(o.request_rounded_bytes) : null),
          stat("Device free", o.device_free_bytes, o.shortfall_bytes ? fmtBytes(o.shortfall_bytes) + " short" : null),
          stat("Allocated by PyTorch", o.allocated_bytes),
          stat("Reserved but unallocated", o.reserved_unallocated_bytes, o.largest_free_block_bytes != null ? "largest free block " + fmtBytes(o.largest_free_block_bytes) : null)),
        ((f) => f ? fixBlock(f, "oom-fit") : o.recommendations.length ? el("div", { "data-testid": "oom-fit" }, el("h3", null, "What to change, cheapest first"),
          el("ol", { class: "recs" }, o.recommendations.map((r) => el("li", { "data-testid": "fix", "data-id": r.id },
            el("span", { class: "cost c-" + r.cost }, COST_WORDS[r.cost] || r.cost), " ", el("span", { class: "action" }, rich(r.action)), el("div", { class: "why" }, rich(r.why)),
            r.predicted ? el("div", { class: "why predicted" }, "Predicted, " + r.predicted.words + ".") : null)))) : null)(
          (rep.fit || []).find((d) => d.device === o.device && d.at.event_index === o.event_index)),
        o.evidence.length ? el("div", null, el("h3", null, "Evidence"), el("ul", { class: "plain" }, o.evidence.map((t) => el("li", null, rich(t))))) : null,
        o.notes.length ? el("div", null, el("h3", null, "Notes"), el("ul", { class: "plain" }, o.notes.map((t) => el("li", null, rich(t))))) : null,
        o.cannot_conclude && o.cannot_conclude.length ? el("div", null, el("h3", null, "Cannot conclude"), el("ul", { class: "plain" }, o.cannot_conclude.map((t) => el("li", null, rich(t))))) : null,
        o.implied_limit ? el("p", { class: "muted" }, "Implied per-process limit: at least " + fmtBytes(o.implied_limit.at_least_bytes) + ", below " + fmtBytes(o.implied_limit.below_bytes) + ".") : null,
        o.live_sites && o.live_sites.length ? el("details", null, el("summary", null, "Live at the OOM, by site (" + o.live_sites.length + ")"),
          el("table", { class: "grid compact" }, el("tbody", null, o.live_sites.map((r) => el("tr", null, el("td", { class: "mono site" }, path(shownSite(r.site))), bytesCell(r.bytes), el("td", { class: "num" }, fmtPct(r.share))))))) : null);
      s.appendChild(card);
    });
    if (rep.notes && rep.notes.length) s.appendChild(el("ul", { class: "plain muted" }, rep.notes.map((t) => el("li", null, rich(t)))));
  }
  function syncDeviceSelect() {
    const sel = document.getElementById("device-select");
    if (sel) sel.value = String(devId());
  }

  // 3. timeline
  //
  // Four stacked canvases: back (phases, grid, axes), #timeline-plot (the live bytes alone,
  // painted pixel by pixel), marks (reserved line, peak, OOMs, moment, pinned outline) and
  // over (hover, drag). The plot is painted per device-pixel column from one sample: the
  // highest live bytes among the samples whose state overlaps the column (the samples keep
  // every bucket's maximum, so spikes are never lost). In that column the bands live at the
  // sample are stacked in allocation order with their boundaries rounded to whole rows, so
  // they tile the column exactly: a band under a pixel tall still holds its bytes. Runs of
  // such bands are painted as one stratum in the colour of their largest site (hover names
  // them), and the aggregate band of every other allocation goes on top. The painted height
  // of a column is therefore its live bytes, whatever the zoom.
  function tlSource(tl) {
    const smp = tl.samples;
    const n = smp.event_index.length;
    const sx = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) sx[i] = smp.event_index[i];
    sx[n] = n ? smp.event_index[n - 1] + 1 : 0;
    const bands = tl.bands.map((b, i) => {
      const k = b.base.length / 2;
      const segS = new Int32Array(k + 1), segB = new Float64Array(k);
      for (let j = 0; j < k; j++) { segS[j] = b.base[2 * j]; segB[j] = b.base[2 * j + 1]; }
      segS[k] = b.last_sample + 1;
      const color = siteColor(b.site);
      return { b: b, segS: segS, segB: segB, color: color, rgba: packColor(color, i % 2 ? 0.9 : 1) };
    });
    return { tl: tl, smp: smp, n: n, sx: sx, bands: bands, events: tl.every_event || null };
  }
  function packColor(hexColor, shade) { // "#rrggbb" → ABGR word for ImageData, darkened by `shade`
    const v = parseInt(hexColor.slice(1), 16);
    const r = Math.round(((v >> 16) & 255) * shade), g = Math.round(((v >> 8) & 255) * shade), b = Math.round((v & 255) * shade);
    return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
  }
  function paleColor(word) { // the same colour mixed half with white (others while a band is pinned)
    const r = word & 255, g = (word >> 8) & 255, b = (word >> 16) & 255;
    const m = (c) => Math.round((c + 255) / 2);
    return ((255 << 24) | (m(b) << 16) | (m(g) << 8) | m(r)) >>> 0;
  }
  const OTHER_RGBA = packColor("#c3c8cf", 1);
  function buildTimeline(dp) {
    const tl = dp.timeline;
    const src = tlSource(tl);
    let origin = null;
    for (const t of tl.samples.time_us) if (t != null) { origin = t; break; }
    // Phases (annotations) and steps (leaks), laid out in lanes.
    const items = tl.phases.map((p) => ({ name: p.name, first: p.first_event, last: p.last_event, kind: "phase", start_us: p.start_us, end_us: p.end_us }));
    const lk = (DATA.leaks.devices || []).find((d) => d.device === dp.device);
    if (lk && lk.steps) {
      for (const st of lk.steps) {
        if (!items.some((p) => p.name === st.name && p.first === st.first_event && p.last === st.last_event))
          items.push({ name: st.name, first: st.first_event, last: st.last_event, kind: "step", peak: st.peak_bytes });
      }
    }
    items.sort((a, b) => a.first - b.first || (b.last - b.first) - (a.last - a.first));
    const laneEnd = [];
    for (const it of items) {
      let l = laneEnd.findIndex((e) => e < it.first);
      if (l < 0) { l = laneEnd.length; laneEnd.push(0); }
      laneEnd[l] = it.last;
      it.lane = l;
    }
    const lanes = Math.min(laneEnd.length, 4);
    let shade = 0;
    for (const it of items) if (it.lane === 0) it.shade = shade++ % 2;
    const T = { dp: dp, full: src, origin: origin, phases: items, lanes: lanes, hover: null, drag: null, geo: null, seq: 0,
      lo: src.sx[0], hi: src.sx[src.n] };
    useSource(T, src);
    T.x0 = T.lo; T.x1 = T.hi;
    return T;
  }
  function useSource(T, src) {
    T.src = src; T.tl = src.tl; T.smp = src.smp; T.n = src.n; T.sx = src.sx; T.bands = src.bands;
  }

  function renderTimeline() {
    const s = sections.timeline;
    const dp = devPage();
    S.tl = null;
    ML.drawn.timeline_bands = 0;
    ML.view = { first: null, last: null };
    ML.plot = null;
    if (!dp || !dp.timeline || !dp.timeline.samples.event_index.length) {
      const msgs = dp ? absentFor(dp.device).filter((a) => a.code === "no_trace") : [];
      fill(s, heading("Active memory timeline"),
        el("p", { class: "absent", "data-testid": "absent" }, msgs.length ? msgs[0].message : dp ? "No trace was recorded for this device: there is no timeline." : "No device to show."));
      return;
    }
    const T = (S.tl = buildTimeline(dp));
    const tl = dp.timeline;
    const back = el("canvas", { class: "tl-back" });
    const plot = el("canvas", { class: "tl-layer", id: "timeline-plot" });
    const marks = el("canvas", { class: "tl-layer" });
    const over = el("canvas", { class: "tl-over", "aria-label": "active memory timeline" });
    const wrap = el("div", { class: "tl-wrap" }, back, plot, marks, over);
    T.back = back; T.plot = plot; T.marks = marks; T.over = over; T.wrap = wrap;
    const peak = el("span", { class: "peak-figure", "data-testid": "peak-bytes", "data-bytes": String(tl.peak_bytes), title: fmtInt(tl.peak_bytes) + " bytes" }, fmtBytes(tl.peak_bytes));
    const pinned = el("aside", { id: "pinned", class: "pinned" });
    T.pinnedEl = pinned;
    T.detailEl = el("span", { class: "muted", "data-testid": "timeline-detail" });
    const legend = el("div", { class: "legend" },
      el("span", null, el("i", { class: "sw sw-bands" }), "allocations, coloured by site (" + (tl.other_allocations ? fmtInt(tl.bands.length) + " largest by bytes and by bytes × lifetime" : "all " + fmtInt(tl.bands.length)) + "; those under a pixel tall merge into strata)"),
      el("span", null, el("i", { class: "sw sw-other" }), "other allocations (" + fmtInt(tl.other_allocations) + (tl.other_allocations ? ", each ≤ " + fmtBytes(tl.largest_other_bytes) : "") + ")"),
      el("span", null, el("i", { class: "sw sw-reserved" }), "reserved"),
      el("span", null, el("i", { class: "sw sw-peak" }), "peak"),
      tl.oom_events.length ? el("span", null, el("i", { class: "sw sw-oom" }), "OOM") : null,
      T.phases.length ? el("span", null, el("i", { class: "sw sw-phase" }), "phases / steps") : null,
      el("span", null, el("i", { class: "sw sw-moment" }), "moment shown below"));
    fill(s,
      heading("Active memory timeline", devName(dp.device) + " · " + fmtInt(tl.events) + (tl.events === 1 ? " event" : " events") + " · window " + tl.window.first + "…" + tl.window.last),
      el("div", { class: "figures" },
        el("span", null, "Peak ", peak, " at event " + fmtInt(tl.peak.event_index)),
        el("span", null, "max reserved ", el("b", null, fmtBytes(tl.max_reserved_bytes))),
        T.detailEl,
        el("span", { class: "hint" }, "drag to zoom · double-click to reset · click a band to pin it (Esc unpins)"),
        el("button", { class: "btn", onclick: () => { resetZoom(); } }, "Reset zoom")),
      el("div", { class: "tl-grid" }, wrap, pinned),
      legend);
    over.addEventListener("mousemove", guard(tlMove));
    over.addEventListener("mousedown", guard(tlDown));
    over.addEventListener("mouseleave", guard(() => { if (!T.drag) { T.hover = null; hideTip(); drawOverlay(); } }));
    over.addEventListener("dblclick", guard((e) => { e.preventDefault(); resetZoom(); }));
    renderPinned();
    drawTimeline();
  }

  // Zoom: the static page shows its samples larger; a served page asks its server for the
  // window at the detail of its columns (every event once the window holds fewer events than
  // columns). Either way the URL's #window=FIRST-LAST names what is shown.
  function resetZoom() {
    const T = S.tl;
    if (!T) return Promise.resolve(false);
    return zoomTo(T.lo, T.hi - 1);
  }
  function zoomTo(first, last) {
    const T = S.tl;
    if (!T) return Promise.resolve(false);
    first = Math.max(T.lo, Math.min(Math.floor(first), T.hi - 1));
    last = Math.max(first, Math.min(Math.floor(last), T.hi - 1));
    T.x0 = first; T.x1 = last + 1;
    const whole = first === T.lo && last === T.hi - 1;
    setHash(whole ? null : first + "-" + last);
    const seq = ++T.seq;
    if (!SERVE || whole) {
      if (T.src !== T.full) { const pinned = pinnedBand(); useSource(T, T.full); repin(pinned); }
      drawTimeline();
      if (SERVE && whole) followWindow(T, null);
      return Promise.resolve(true);
    }
    drawTimeline(); // the samples at hand, larger, while the window is fetched
    const g = T.geo, dpr = window.devicePixelRatio || 1;
    const columns = Math.max(1, Math.round((g.right - g.left) * dpr));
    T.detailEl.textContent = "fetching events " + fmtInt(first) + "…" + fmtInt(last) + "…";
    return api("window", { device: T.dp.device, first: first, last: last, columns: columns }).then((w) => {
      if (seq !== T.seq || S.tl !== T) return false;
      const remap = adoptStacks(w.frames, w.stacks);
      for (const b of w.bands) b.stack = remap(b.stack);
      if (w.every_event) w.every_event.stack = w.every_event.stack.map(remap);
      const pinned = pinnedBand();
      useSource(T, tlSource(w));
      repin(pinned);
      drawTimeline();
      followWindow(T, w);
      return true;
    });
  }
  function repin(b) { // the pinned allocation again, in a new set of bands
    if (!b) return;
    const i = S.tl.bands.findIndex((B) => B.b.address === b.address && B.b.alloc_event === b.alloc_event);
    S.pinned = i >= 0 ? i : null;
    ML.pinned = S.pinned;
  }
  function setHash(w) {
    try {
      const url = location.pathname + location.search + (w ? "#window=" + w : "");
      history.replaceState(null, "", url);
    } catch (_) { /* file:// pages may refuse; the view is still right */ }
  }
  function hashWindow() {
    const m = /^#window=(-?\d+)-(-?\d+)$/.exec(location.hash || "");
    return m ? [Number(m[1]), Number(m[2])] : null;
  }

  function tlGeometry(T) {
    const W = Math.max(320, Math.floor(T.wrap.clientWidth || 800));
    const laneH = 16;
    const top = 10 + T.lanes * laneH + (T.lanes ? 6 : 0);
    const H = 380 + top;
    return { W: W, H: H, left: 76, right: W - 14, top: top, bottom: H - 30, laneH: laneH, laneTop: 8 };
  }

  function drawTimeline() {
    const T = S.tl;
    if (!T) return;
    const g = (T.geo = tlGeometry(T));
    const ctx = setupCanvas(T.back, g.W, g.H);
    setupCanvas(T.plot, g.W, g.H);
    setupCanvas(T.marks, g.W, g.H);
    setupCanvas(T.over, g.W, g.H);
    const { smp, sx, n } = T;
    const pw = g.right - g.left, ph = g.bottom - g.top;
    const x0 = T.x0, x1 = T.x1;
    ML.view = { first: x0, last: x1 - 1 };
    const i0 = Math.max(0, lowerBound(smp.event_index, x0));
    const i1 = Math.max(0, lowerBound(smp.event_index, x1 - 1));
    let ymax = 0;
    for (let i = i0; i <= i1 && i < n; i++) ymax = Math.max(ymax, smp.reserved_bytes[i], smp.live_bytes[i]);
    if (!(ymax > 0)) ymax = 1024;
    ymax *= 1.06;
    const ystep = niceStep(ymax / 5, true);
    const kx = pw / (x1 - x0), ky = ph / ymax;
    const X = (e) => g.left + (e - x0) * kx;
    const Y = (b) => g.bottom - b * ky;
    T.X = X; T.Y = Y; T.kx = kx; T.ky = ky; T.ymax = ymax;
    ctx.clearRect(0, 0, g.W, g.H);
    ctx.font = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
    // phase shading and lanes
    for (const it of T.phases) {
      if (it.last + 1 < x0 || it.first > x1) continue;
      const xa = Math.max(g.left, X(it.first)), xb = Math.min(g.right, X(it.last + 1));
      if (it.lane === 0) {
        ctx.fillStyle = it.shade ? "#f1f4f8" : "#f8f9fb";
        ctx.fillRect(xa, g.top, xb - xa, ph);
      }
      if (it.lane < T.lanes) {
        const y = g.laneTop + it.lane * g.laneH;
        ctx.fillStyle = it.kind === "step" ? "#e6ecf3" : "#e9e6f2";
        ctx.fillRect(xa, y, Math.max(1, xb - xa - 1), g.laneH - 3);
        if (xb - xa > 28) {
          ctx.fillStyle = "#3e4c59";
          ctx.textBaseline = "middle";
          ctx.fillText(fitText(ctx, it.name, xb - xa - 8), xa + 4, y + (g.laneH - 3) / 2);
        }
      }
    }
    // grid and y axis
    ctx.strokeStyle = "#e6e9ed"; ctx.lineWidth = 1; ctx.fillStyle = "#616e7c";
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (let v = 0; v <= ymax; v += ystep) {
      const y = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(g.left, y); ctx.lineTo(g.right, y); ctx.stroke();
      ctx.fillText(fmtAxis(v), g.left - 8, y);
    }
    // x axis
    const xstep = Math.max(1, niceStep((x1 - x0) / Math.max(2, Math.floor(pw / 110)), false));
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (let v = Math.ceil(x0 / xstep) * xstep; v <= x1; v += xstep) {
      const x = Math.round(X(v)) + 0.5;
      ctx.strokeStyle = "#c9ced6";
      ctx.beginPath(); ctx.moveTo(x, g.bottom); ctx.lineTo(x, g.bottom + 4); ctx.stroke();
      ctx.fillText(fmtInt(v + 0 === 0 ? 0 : v), x, g.bottom + 7);
    }
    ctx.textAlign = "right";
    ctx.fillStyle = "#8a96a3";
    ctx.fillText("event index", g.right, g.bottom + 18);
    ctx.strokeStyle = "#9aa5b1"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(g.left, g.bottom + 0.5); ctx.lineTo(g.right, g.bottom + 0.5); ctx.stroke();
    paintPlot(T);
    drawMarks(T);
    drawOverlay();
    const shown = (T.src.events ? "every event" : fmtInt(n) + " samples") + (T.src === T.full ? "" : " of events " + fmtInt(T.tl.window.first) + "…" + fmtInt(T.tl.window.last));
    T.detailEl.textContent = shown;
    ML.plot = { left: g.left, top: g.top, width: pw, height: ph, y_max_bytes: ymax, first_event: x0, last_event: x1 - 1 };
  }

  // The column picture: which sample each device-pixel column shows, and its stack.
  function pickSamples(T, cols) {
    const { smp, sx, n } = T;
    const pick = new Int32Array(cols).fill(-1);
    const span = (T.x1 - T.x0) / cols;
    let i = Math.max(0, lowerBound(smp.event_index, T.x0));
    for (let c = 0; c < cols; c++) {
      const xa = T.x0 + c * span, xb = T.x0 + (c + 1) * span;
      if (xb <= sx[0] || xa >= sx[n]) continue;
      while (i > 0 && sx[i] > xa) i--;
      while (i + 1 < n && sx[i + 1] <= xa) i++;
      let best = -1;
      for (let j = i; j < n && sx[j] < xb; j++) {
        if (sx[j + 1] <= xa) continue;
        if (best < 0 || smp.live_bytes[j] > smp.live_bytes[best]) best = j;
      }
      pick[c] = best;
    }
    return pick;
  }
  // Walks the stack of sample `s` bottom-up: visit(lo, hi, kind, ref) for each band drawn
  // alone (kind "band", ref its index), each stratum of bands under MIN_ROWS rows (kind
  // "stratum", ref its member indices when `members`, else the index of its largest band),
  // and the aggregate of the other allocations (kind "other").
  const MIN_ROWS = 1.5;
  function walkColumn(T, s, rowsPerByte, members, visit) {
    const bands = T.bands;
    let base = 0, run = null;
    const flush = () => {
      if (run) visit(run.lo, run.hi, "stratum", members ? run.list : run.big);
      run = null;
    };
    for (let i = 0; i < bands.length; i++) {
      const b = bands[i].b;
      if (b.first_sample > s || b.last_sample < s) continue;
      const lo = base, hi = base + b.size;
      base = hi;
      if (b.size * rowsPerByte >= MIN_ROWS || i === S.pinned) { flush(); visit(lo, hi, "band", i); continue; }
      if (run && bands[run.big].b.site !== b.site && (run.hi - run.lo) * rowsPerByte >= MIN_ROWS) flush();
      if (!run) run = { lo: lo, hi: hi, big: i, list: members ? [i] : null };
      else {
        run.hi = hi;
        if (b.size > bands[run.big].b.size) run.big = i;
        if (members) run.list.push(i);
      }
    }
    flush();
    const other = T.smp.other_bytes[s];
    if (other > 0) visit(base, base + other, "other", null);
    return base + other;
  }
  function paintPlot(T) {
    const g = T.geo, dpr = window.devicePixelRatio || 1;
    const L = Math.round(g.left * dpr), R = Math.round(g.right * dpr);
    const TOP = Math.round(g.top * dpr), BOT = Math.round(g.bottom * dpr);
    const cols = R - L, rows = BOT - TOP;
    const ctx = T.plot.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, T.plot.width, T.plot.height);
    T.cols = null;
    if (cols <= 0 || rows <= 0) return;
    const perByte = rows / T.ymax;
    const pick = pickSamples(T, cols);
    T.cols = { L: L, TOP: TOP, cols: cols, rows: rows, perByte: perByte, pick: pick, dpr: dpr };
    const img = ctx.createImageData(cols, rows);
    const px = new Uint32Array(img.data.buffer);
    const pinnedI = S.pinned;
    const colors = T.bands.map((B, i) => pinnedI != null && i !== pinnedI ? paleColor(B.rgba) : B.rgba);
    const other = pinnedI != null ? paleColor(OTHER_RGBA) : OTHER_RGBA;
    const row = (v) => Math.max(0, Math.min(rows, Math.round(rows - v * perByte)));
    const drawn = new Uint8Array(T.bands.length);
    for (let c = 0; c < cols; c++) {
      const s = pick[c];
      if (s < 0) continue;
      walkColumn(T, s, perByte, false, (lo, hi, kind, ref) => {
        const color = kind === "other" ? other : colors[ref];
        if (kind !== "other") drawn[ref] = 1;
        for (let r = row(hi), e = row(lo); r < e; r++) px[r * cols + c] = color;
      });
    }
    ctx.putImageData(img, L, TOP);
    let k = 0;
    for (let i = 0; i < drawn.length; i++) k += drawn[i];
    ML.drawn.timeline_bands = k;
  }
  function drawMarks(T) {
    const g = T.geo, ctx = T.marks.getContext("2d");
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, g.W, g.H);
    const { smp, sx, n, X, Y } = T;
    const x0 = T.x0, x1 = T.x1;
    ctx.save();
    ctx.beginPath(); ctx.rect(g.left, g.top - 1, g.right - g.left, g.bottom - g.top + 1); ctx.clip();
    const pinnedI = S.pinned;
    if (pinnedI != null && T.bands[pinnedI]) {
      bandPath(ctx, T, T.bands[pinnedI]);
      ctx.strokeStyle = "#111827"; ctx.lineWidth = 1.5; ctx.stroke();
    }
    // reserved line
    const j0 = Math.max(0, lowerBound(smp.event_index, x0)), j1 = Math.min(n - 1, Math.max(0, lowerBound(smp.event_index, x1)));
    ctx.beginPath();
    for (let i = j0; i <= j1; i++) {
      const y = Math.round(Y(smp.reserved_bytes[i])) + 0.5;
      if (i === j0) ctx.moveTo(X(sx[i]), y); else ctx.lineTo(X(sx[i]), y);
      ctx.lineTo(X(sx[i + 1]), y);
    }
    ctx.strokeStyle = "#334155"; ctx.lineWidth = 1.25; ctx.stroke();
    ctx.restore();
    // OOM markers
    ctx.textAlign = "left"; ctx.textBaseline = "top";
    for (const e of T.dp.timeline.oom_events) {
      if (e < x0 || e >= x1) continue;
      const x = Math.round(X(e + 0.5)) + 0.5;
      ctx.strokeStyle = "#c81e1e"; ctx.lineWidth = 1.5; ctx.setLineDash([4, 3]);
      ctx.beginPath(); ctx.moveTo(x, g.top); ctx.lineTo(x, g.bottom); ctx.stroke(); ctx.setLineDash([]);
      label(ctx, "OOM", x, g.bottom - 22, "#c81e1e", g, true);
    }
    // moment marker
    const m = moment();
    if (m && m.at.event_index >= x0 && m.at.event_index < x1) {
      const x = Math.round(X(m.at.event_index + 0.5)) + 0.5;
      ctx.strokeStyle = "#2563eb"; ctx.lineWidth = 1; ctx.setLineDash([2, 3]);
      ctx.beginPath(); ctx.moveTo(x, g.top); ctx.lineTo(x, g.bottom); ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = "#2563eb";
      ctx.beginPath(); ctx.moveTo(x - 5, g.bottom); ctx.lineTo(x + 5, g.bottom); ctx.lineTo(x, g.bottom - 7); ctx.fill();
    }
    // peak marker: the whole trace's, or the window's when a served window is shown
    const pk = T.src === T.full ? T.dp.timeline : T.tl;
    const pe = pk.peak.event_index;
    if (pe >= x0 && pe < x1) {
      const x = X(pe + 0.5), y = Y(pk.peak_bytes);
      ctx.fillStyle = "#111827";
      ctx.beginPath(); ctx.arc(x, y, 3.5, 0, Math.PI * 2); ctx.fill();
      ctx.strokeStyle = "#111827"; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(x, y - 4); ctx.lineTo(x, Math.max(g.top + 2, y - 14)); ctx.stroke();
      label(ctx, (T.src === T.full ? "peak " : "window peak ") + fmtBytes(pk.peak_bytes), x, Math.max(g.top + 2, y - 30), "#111827", g);
    }
  }
  function label(ctx, text, x, y, color, g, left) {
    ctx.font = "600 11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
    const w = ctx.measureText(text).width + 8;
    let lx = left ? x - 6 - w : x + 6;
    if (lx + w > g.right) lx = x - 6 - w;
    if (lx < g.left) lx = x + 6;
    ctx.fillStyle = "rgba(255,255,255,0.92)";
    ctx.fillRect(lx, y, w, 16);
    ctx.fillStyle = color; ctx.textAlign = "left"; ctx.textBaseline = "middle";
    ctx.fillText(text, lx + 4, y + 8);
    ctx.font = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  }
  function bandPath(ctx, T, B) {
    const { X, Y, sx } = T;
    const size = B.b.size, k = B.segB.length;
    const minH = 1.5 / T.ky; // an outline at least 1.5 px tall
    ctx.beginPath();
    for (let j = 0; j < k; j++) {
      const y = Y(B.segB[j] + Math.max(size, minH));
      const xa = X(sx[B.segS[j]]), xb = X(sx[B.segS[j + 1]]);
      if (j === 0) ctx.moveTo(xa, y); else ctx.lineTo(xa, y);
      ctx.lineTo(xb, y);
    }
    for (let j = k - 1; j >= 0; j--) {
      const y = Y(B.segB[j]);
      ctx.lineTo(X(sx[B.segS[j + 1]]), y);
      ctx.lineTo(X(sx[B.segS[j]]), y);
    }
    ctx.closePath();
  }
  function bandBaseAt(B, s) {
    const j = lowerBound(B.segS.subarray(0, B.segB.length), s);
    return j < 0 ? null : B.segB[j];
  }
  // What is under a point of the plot: the same column walk that painted it.
  function tlHit(px, py) {
    const T = S.tl, g = T.geo, C = T.cols;
    if (!g || !C || px < g.left || px > g.right) return null;
    if (py < g.top) {
      const lane = Math.floor((py - g.laneTop) / g.laneH);
      const e = T.x0 + (px - g.left) / T.kx;
      const it = T.phases.find((p) => p.lane === lane && p.first <= e && e < p.last + 1);
      return it ? { kind: "phase", it: it } : null;
    }
    if (py > g.bottom) return null;
    const c = Math.max(0, Math.min(C.cols - 1, Math.floor(px * C.dpr) - C.L));
    const s = C.pick[c];
    if (s < 0) return null;
    const r = Math.floor(py * C.dpr) - C.TOP;
    const row = (v) => Math.round(C.rows - v * C.perByte);
    let hit = null;
    walkColumn(T, s, C.perByte, true, (lo, hi, kind, ref) => {
      if (!hit && r >= row(hi) && r < row(lo)) hit = { kind: kind, ref: ref, lo: lo, hi: hi };
    });
    const e = Math.floor(T.x0 + ((c + 0.5) * (T.x1 - T.x0)) / C.cols); // the event at the column's centre
    if (!hit) return { kind: "sample", s: s, e: e };
    if (hit.kind === "band") return { kind: "band", i: hit.ref, s: s, e: e };
    if (hit.kind === "stratum") return { kind: "stratum", list: hit.ref, bytes: hit.hi - hit.lo, s: s, e: e };
    return { kind: "other", s: s, e: e };
  }
  function bandDetails(i, full) {
    const T = S.tl, b = T.bands[i].b;
    const when = (ev, us) => ev == null ? null : ev < 0 ? "before the trace" : "event " + fmtInt(ev) + (fmtRel(us, T.origin) ? " · " + fmtRel(us, T.origin) : "");
    return el("div", { class: "tip" },
      el("div", { class: "tip-title" }, el("i", { class: "sw", style: "background:" + T.bands[i].color }), el("b", null, fmtBytes(b.size)), el("span", { class: "muted" }, " " + fmtInt(b.size) + " bytes")),
      kv([
        ["site", el("span", { class: "mono" }, path(shownSite(b.site)))],
        ["address", el("span", { class: "mono" }, hex(b.address))],
        ["allocated", when(b.alloc_event, b.alloc_time_us)],
        b.free_requested_event != null && b.free_requested_event !== b.free_event ? ["free requested", "event " + fmtInt(b.free_requested_event)] : null,
        ["freed", b.free_event != null ? when(b.free_event, b.free_time_us) : "not freed in the trace"],
        b.origin !== "trace" ? ["origin", b.origin.replace(/_/g, " ")] : null,
        full ? ["band", "#" + i + " of " + T.bands.length] : null,
      ].concat(noteRows(b.note))),
      stackList(b.stack));
  }
  function stratumDetails(h) { // a run of bands under a pixel tall, by site
    const T = S.tl;
    const bySite = new Map();
    for (const i of h.list) {
      const b = T.bands[i].b;
      const e = bySite.get(b.site) || { n: 0, bytes: 0, color: T.bands[i].color };
      e.n++; e.bytes += b.size;
      bySite.set(b.site, e);
    }
    const rows = [...bySite.entries()].sort((a, b) => b[1].bytes - a[1].bytes);
    const head = rows.length === 1
      ? fmtInt(h.list.length) + " allocation" + (h.list.length === 1 ? "" : "s") + " of " + rows[0][0]
      : fmtInt(h.list.length) + " allocations of " + rows.length + " sites";
    return el("div", { class: "tip" },
      el("div", { class: "tip-title" }, el("i", { class: "sw", style: "background:" + rows[0][1].color }), el("b", null, fmtBytes(h.bytes)), " " , el("span", null, head)),
      el("p", { class: "muted" }, "Each under a pixel tall at this zoom, so painted together; zoom in or pin one to see it alone."),
      el("table", { class: "grid compact" }, el("tbody", null, rows.slice(0, 8).map(([site, e]) =>
        el("tr", null, el("td", null, el("i", { class: "sw", style: "background:" + e.color })), el("td", { class: "mono site" }, path(shownSite(site))), el("td", { class: "num" }, fmtInt(e.n)), bytesCell(e.bytes))))),
      rows.length > 8 ? el("p", { class: "muted" }, "… and " + (rows.length - 8) + " more sites") : null,
      eventDetails(h));
  }
  function eventDetails(h) { // the trace event under the cursor, once every event is shown
    const T = S.tl, ev = T.src.events;
    if (!ev || h.e == null) return null;
    const k = lowerBound(ev.index, h.e);
    if (k < 0 || ev.index[k] !== h.e) return null;
    const action = ev.action[k];
    return el("div", { class: "tip-event", "data-event": String(h.e) },
      el("div", null, el("b", null, "event " + fmtInt(h.e)), " · " + action.replace(/_/g, " ") + " · ", el("b", null, fmtBytes(ev.size[k])), " (" + fmtInt(ev.size[k]) + " bytes) at ", el("span", { class: "mono" }, hex(ev.address[k]))),
      ev.stack[k] != null ? stackList(ev.stack[k]) : null);
  }
  function sampleDetails(h) {
    const T = S.tl, s = h.s, smp = T.smp;
    const ev = smp.event_index[s];
    const rel = fmtRel(smp.time_us[s], T.origin);
    const phases = T.phases.filter((p) => p.first <= ev && ev <= p.last).map((p) => p.name);
    return el("div", { class: "tip" },
      h.kind === "other"
        ? el("div", { class: "tip-title" }, el("i", { class: "sw sw-other" }), el("b", null, fmtBytes(smp.other_bytes[s])), " in other allocations")
        : el("div", { class: "tip-title" }, el("b", null, "after event " + fmtInt(ev))),
      h.kind === "other" ? el("p", { class: "muted" }, "The aggregate band holds the " + fmtInt(T.tl.other_allocations) + " allocation" + (T.tl.other_allocations === 1 ? "" : "s") + " of the window without a band of their own (each at most " + fmtBytes(T.tl.largest_other_bytes) + "); its height is their live bytes.") : null,
      kv([
        ["event", fmtInt(ev) + (rel ? " · " + rel : "")],
        ["live", fmtBytes(smp.live_bytes[s])],
        ["reserved", fmtBytes(smp.reserved_bytes[s])],
        ["in bands", fmtBytes(smp.live_bytes[s] - smp.other_bytes[s])],
        phases.length ? ["phase", phases.join(", ")] : null,
      ]),
      eventDetails(h));
  }
  function tlPos(e) {
    const r = S.tl.over.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  }
  function tlMove(e) {
    const T = S.tl;
    if (!T) return;
    const [px, py] = tlPos(e);
    if (T.drag) {
      T.drag.x1 = px;
      hideTip();
      drawOverlay();
      return;
    }
    const h = tlHit(px, py);
    T.hover = h && h.kind === "band" ? h.i : null;
    drawOverlay();
    if (!h) { hideTip(); return; }
    if (h.kind === "band") {
      const tip = bandDetails(h.i, false);
      const evd = eventDetails(h);
      if (evd) tip.appendChild(evd);
      showTip(tip, e.clientX, e.clientY);
    } else if (h.kind === "stratum") showTip(stratumDetails(h), e.clientX, e.clientY);
    else if (h.kind === "phase") showTip(el("div", { class: "tip" }, el("div", { class: "tip-title" }, el("b", null, h.it.name)), kv([["kind", h.it.kind === "step" ? "step (leaks)" : "annotation"], ["events", fmtInt(h.it.first) + " … " + fmtInt(h.it.last)], h.it.start_us != null ? ["duration", ((h.it.end_us - h.it.start_us) / 1e3).toFixed(3) + " ms"] : null, h.it.peak != null ? ["step peak", fmtBytes(h.it.peak)] : null])), e.clientX, e.clientY);
    else showTip(sampleDetails(h), e.clientX, e.clientY);
  }
  function tlDown(e) {
    if (e.button !== 0) return;
    const [px] = tlPos(e);
    S.tl.drag = { x0: px, x1: px };
    e.preventDefault();
  }
  function tlUp(e) {
    const T = S.tl;
    if (!T || !T.drag) return;
    const d = T.drag;
    T.drag = null;
    const g = T.geo;
    const a = Math.max(g.left, Math.min(d.x0, d.x1)), b = Math.min(g.right, Math.max(d.x0, d.x1));
    if (b - a > 4) {
      // snap to whole events (event e's state spans [e, e + 1)); at least one event
      const e0 = T.x0 + (a - g.left) / T.kx, e1 = T.x0 + (b - g.left) / T.kx;
      let lo = Math.round(e0), hi = Math.round(e1);
      if (hi <= lo) { lo = Math.floor((e0 + e1) / 2); hi = lo + 1; }
      lo = Math.max(lo, T.lo); hi = Math.min(hi, T.hi);
      if (hi > lo && hi - lo < T.x1 - T.x0) zoomTo(lo, hi - 1).catch(recordError);
      else drawTimeline();
      return;
    }
    const [px, py] = tlPos(e);
    const h = tlHit(px, py);
    if (h && h.kind === "band") pin(S.pinned === h.i ? null : h.i);
    else if (h && h.kind !== "phase" && S.pinned != null && py > g.top) pin(null);
    drawOverlay();
  }
  function drawOverlay() {
    const T = S.tl;
    if (!T || !T.geo) return;
    const g = T.geo;
    const ctx = T.over.getContext("2d");
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, g.W, g.H);
    if (T.hover != null && T.hover !== S.pinned && T.bands[T.hover]) {
      ctx.save();
      ctx.beginPath(); ctx.rect(g.left, g.top, g.right - g.left, g.bottom - g.top); ctx.clip();
      bandPath(ctx, T, T.bands[T.hover]);
      ctx.fillStyle = "rgba(255,255,255,0.28)"; ctx.fill();
      ctx.strokeStyle = "#1f2933"; ctx.lineWidth = 1; ctx.stroke();
      ctx.restore();
    }
    if (T.drag) {
      const a = Math.max(g.left, Math.min(T.drag.x0, T.drag.x1)), b = Math.min(g.right, Math.max(T.drag.x0, T.drag.x1));
      ctx.fillStyle = "rgba(37,99,235,0.12)";
      ctx.fillRect(a, g.top, b - a, g.bottom - g.top);
      ctx.strokeStyle = "rgba(37,99,235,0.6)"; ctx.lineWidth = 1;
      ctx.strokeRect(a + 0.5, g.top + 0.5, b - a - 1, g.bottom - g.top - 1);
    }
  }
  // A point inside band i where it is painted alone (for tests and scripts), or null.
  ML.bandPoint = function (i) {
    const T = S.tl;
    if (!T || !T.bands[i] || !T.geo || !T.cols) return null;
    const r0 = T.over.getBoundingClientRect();
    if (r0.top < 0 || r0.bottom > window.innerHeight) T.over.scrollIntoView({ block: "center" });
    const C = T.cols, B = T.bands[i], b = B.b;
    if (b.size * C.perByte < MIN_ROWS + 1) return null;
    const row = (v) => Math.round(C.rows - v * C.perByte);
    let best = null, run = 0, bestRun = 0, start = 0;
    for (let c = 0; c <= C.cols; c++) {
      const s = c < C.cols ? C.pick[c] : -1;
      const ok = s >= 0 && b.first_sample <= s && s <= b.last_sample;
      if (ok) { if (!run) start = c; run++; }
      if ((!ok || c === C.cols) && run) {
        if (run > bestRun) {
          const mid = start + (run >> 1), base = bandBaseAt(B, C.pick[mid]);
          if (base != null && row(base) - row(base + b.size) >= 2) { bestRun = run; best = [mid, (row(base) + row(base + b.size)) / 2]; }
        }
        run = 0;
      }
    }
    if (!best) return null;
    const r = T.over.getBoundingClientRect();
    return { x: r.left + (C.L + best[0] + 0.5) / C.dpr, y: r.top + (C.TOP + best[1]) / C.dpr };
  };
  // Band i of the timeline shown (its allocation), and how many there are.
  ML.bandInfo = function (i) {
    const T = S.tl, B = T && T.bands[i];
    return B ? { address: B.b.address, alloc_event: B.b.alloc_event, free_event: B.b.free_event, size: B.b.size } : null;
  };
  ML.bandCount = function () { return S.tl ? S.tl.bands.length : 0; };
  // Show device `id` (as the device selector does); false when the page has no such device.
  ML.selectDevice = function (id) {
    const i = DATA.devices.findIndex((d) => d.device === id);
    if (i < 0) return false;
    selectDevice(i);
    syncDeviceSelect();
    return true;
  };
  // Zoom to events first…last; resolved once that window is drawn at the page's full detail.
  ML.zoom = function (first, last) { return zoomTo(first, last); };
  // The trace events of the window shown, when the page has them (served, every event).
  ML.windowEvents = function () {
    const T = S.tl;
    return T && T.src.events ? { index: T.src.events.index.slice(), action: T.src.events.action.slice(), size: T.src.events.size.slice() } : null;
  };

  // The server behind a served page.
  function api(route, params) {
    const q = new URLSearchParams(params);
    q.set("file", String(SERVE.file));
    q.set("token", TOKEN || "");
    return fetch("/api/" + route + "?" + q.toString(), { headers: { "X-Memlens-Token": TOKEN || "" }, cache: "no-store" })
      .then((r) => r.json().then((j) => { if (!r.ok) throw new Error(route + ": " + (j.error || r.status)); return j; }));
  }
  // Frames and stacks of a server answer, added to the page's own; returns the stack map.
  function adoptStacks(frames, stacks) {
    if (!S.frameKey) {
      S.frameKey = new Map(DATA.frames.map((f, i) => [JSON.stringify(f), i]));
      S.stackKey = new Map(DATA.stacks.map((s, i) => [s.join(","), i]));
    }
    const fmap = frames.map((f) => {
      const k = JSON.stringify(f);
      let i = S.frameKey.get(k);
      if (i == null) { i = DATA.frames.length; DATA.frames.push(f); S.frameKey.set(k, i); }
      return i;
    });
    const smap = stacks.map((st) => {
      const g = st.map((f) => fmap[f]);
      const k = g.join(",");
      let i = S.stackKey.get(k);
      if (i == null) { i = DATA.stacks.length; DATA.stacks.push(g); S.stackKey.set(k, i); }
      return i;
    });
    return (i) => (i == null || i < 0 ? i : smap[i]);
  }
  // A served window's moment: its peak, in the state, top and flame sections.
  function followWindow(T, w) {
    const dp = T.dp;
    const k = dp.moments.findIndex((m) => m.name === "window peak");
    if (!w) {
      if (k >= 0) { dp.moments.splice(k, 1); if (S.moment >= dp.moments.length || S.moment === k) S.moment = 0; renderMoment(); }
      return;
    }
    const seq = T.seq;
    // Asked once the zoom has settled (a quarter second without another), so that a run of
    // zooms does not queue a moment per window on the server.
    clearTimeout(S.momentTimer);
    S.momentTimer = setTimeout(() => { if (seq === T.seq && S.tl === T) fetchWindowMoment(T, w, seq); }, 250);
  }
  function fetchWindowMoment(T, w, seq) {
    const dp = T.dp;
    api("moment", { device: dp.device, at: w.peak.event_index, name: "window peak" }).then((mp) => {
      if (seq !== T.seq || S.tl !== T) return;
      const remap = adoptStacks(mp.frames, mp.stacks);
      const m = mp.moment;
      for (const sg of m.state.segments) for (const bl of sg.blocks) if (bl[4] >= 0) bl[4] = remap(bl[4]);
      m.top.row_stacks = m.top.row_stacks.map(remap);
      remapFlameFrames(m.flame, mp.frames);
      const j = dp.moments.findIndex((x) => x.name === "window peak");
      if (j >= 0) dp.moments[j] = m; else dp.moments.push(m);
      S.moment = dp.moments.findIndex((x) => x.name === "window peak");
      renderMoment();
    }).catch(recordError);
  }
  function remapFlameFrames(flame, frames) {
    const idx = frames.map((f) => S.frameKey.get(JSON.stringify(f)));
    for (const view of ["all", "no_cpp", "no_torch", "user"]) {
      const t = flame[view];
      if (t) t.frame = t.frame.map((f) => (f < 0 ? f : idx[f]));
    }
  }

  // pinning
  function pin(i) {
    S.pinned = i;
    ML.pinned = i;
    drawTimeline();
    renderPinned();
    drawState(true);
    markTopRows();
    drawFlame();
  }
  function pinnedBand() { return S.pinned != null && S.tl ? S.tl.bands[S.pinned].b : null; }
  function renderPinned() {
    const T = S.tl;
    if (!T || !T.pinnedEl) return;
    if (S.pinned == null) {
      fill(T.pinnedEl, el("div", { class: "pinned-empty" }, el("h3", null, "Pinned allocation"),
        el("p", { class: "muted" }, "Click a band to pin it: its details stay here, and the same allocation is highlighted in the allocator state, the top table and the flamegraph.")));
      return;
    }
    fill(T.pinnedEl, el("div", { class: "pinned-head" }, el("h3", null, "Pinned allocation"), el("button", { class: "btn small", onclick: () => pin(null) }, "Unpin")),
      bandDetails(S.pinned, true));
  }

  // 4. allocator state
  function renderMomentSelect() {
    const dp = devPage();
    return el("label", { class: "momsel" }, "Moment ",
      el("select", { id: "moment-select", onchange: (e) => { S.moment = Math.max(0, dp.moments.findIndex((m) => m.name === e.target.value)); renderMoment(); } },
        dp.moments.map((m, i) => el("option", { value: m.name, selected: i === S.moment },
          momentLabel(m) + (m.at.event_index >= 0 ? " · after event " + fmtInt(m.at.event_index) : "") + " · " + fmtBytes(m.live_bytes) + " live, " + fmtBytes(m.reserved_bytes) + " reserved"))),
      el("span", { class: "muted" }, " drives the allocator state, the top table and the flamegraph"));
  }
  let ST = null;
  function renderState() {
    const s = sections.state;
    const dp = devPage();
    const m = moment();
    ML.drawn.state_blocks = 0;
    if (!m) { fill(s, heading("Allocator state"), el("p", { class: "absent" }, "No moment to show for this device.")); ST = null; return; }
    ML.moment = m.name;
    const segs = m.state.segments;
    let maxSeg = 0, blocks = 0;
    for (const sg of segs) { maxSeg = Math.max(maxSeg, sg.size); blocks += sg.blocks.length; }
    const canvas = el("canvas", { class: "st-canvas" });
    const spacer = el("div", { class: "st-spacer" }, canvas);
    const scroll = el("div", { class: "st-scroll" }, spacer);
    const fit = el("input", { type: "checkbox", id: "state-fit", onchange: () => { ST.fit = fit.checked; drawState(); } });
    const pinNote = el("div", { class: "pin-note muted" });
    const rowH = segs.length <= 10 ? 26 : segs.length <= 40 ? 20 : 16;
    ST = { rowH: rowH, m: m, segs: segs, maxSeg: maxSeg, canvas: canvas, spacer: spacer, scroll: scroll, fit: false, pinNote: pinNote, rows: [] };
    const notes = [];
    if (!m.state.exact && !(m.frag.notes || []).length) notes.push("Rebuilt from the trace (not the recorded final state): sizes of blocks freed later are estimated from their requested sizes.");
    if (m.state.inconsistencies) notes.push(fmtInt(m.state.inconsistencies) + " trace entries could not be undone while rebuilding this state.");
    for (const t of m.frag.notes || []) if (!notes.includes(t)) notes.push(t);
    const noSeg = absentFor(dp.device).filter((a) => a.code === "no_segments");
    fill(s, 
      heading("Allocator state", devName(dp.device)),
      el("div", { class: "toolbar" }, renderMomentSelect()),
      el("div", { class: "st-grid" },
        el("div", { class: "st-main" },
          el("div", { class: "figures" },
            el("span", null, fmtInt(segs.length) + " segment" + (segs.length === 1 ? "" : "s") + ", " + fmtInt(blocks) + " blocks"),
            el("span", null, "live ", el("b", null, fmtBytes(m.live_bytes))),
            el("span", null, "reserved ", el("b", null, fmtBytes(m.reserved_bytes))),
            el("span", null, m.state.exact ? "recorded state" : "rebuilt from the trace"),
            el("label", { class: "check", title: "draw every segment across the full width instead of to scale" }, fit, " fit each row")),
          noSeg.map((a) => el("p", { class: "absent", "data-testid": "absent" }, a.message)),
          segs.length ? scroll : el("p", { class: "muted" }, "No segment is reserved at this moment."),
          el("div", { class: "legend" },
            el("span", null, el("i", { class: "sw st-alloc" }), "allocated"),
            el("span", null, el("i", { class: "sw st-pending" }), "pending free (record_stream)"),
            el("span", null, el("i", { class: "sw st-free" }), "cached free"),
            el("span", { class: "muted", id: "state-scale" }, "one row per segment, by address (L large pool, S small pool, x expandable, p private pool, s non-default stream); widths scaled to the largest segment (" + fmtBytes(maxSeg) + ")")),
          pinNote),
        el("aside", { class: "frag" }, renderFrag(m), notes.length ? el("div", { class: "notes-block" }, el("h3", null, "Notes"), el("ul", { class: "plain" }, notes.map((t) => el("li", null, rich(t))))) : null)));
    scroll.addEventListener("scroll", guard(() => drawState()));
    canvas.addEventListener("mousemove", guard(stMove));
    canvas.addEventListener("mouseleave", guard(hideTip));
    drawState(true);
  }
  function drawState(scrollToPin) {
    if (!ST || !ST.segs.length) { ML.drawn.state_blocks = 0; return; }
    const { segs, scroll, canvas } = ST;
    const W = Math.max(300, scroll.clientWidth || 700);
    const viewH = Math.min(segs.length * ST.rowH + 4, 520);
    scroll.style.height = viewH + "px";
    ST.spacer.style.height = segs.length * ST.rowH + 4 + "px";
    // the allocation pinned on the timeline, if allocated at this moment
    const pb = pinnedBand();
    ST.pinRow = -1; ST.pinBlock = -1;
    const at = ST.m.at.event_index;
    const liveNow = pb && pb.alloc_event <= at && (pb.free_event == null || pb.free_event > at);
    if (pb && !liveNow) {
      ST.pinNote.textContent = "The pinned allocation (" + hex(pb.address) + ", allocated at event " + pb.alloc_event + (pb.free_event != null ? ", freed at event " + pb.free_event : "") + ") is not live at this moment.";
    } else if (pb) {
      for (let r = 0; r < segs.length && ST.pinRow < 0; r++) {
        const sg = segs[r];
        if (pb.address < sg.address || pb.address >= sg.address + sg.size) continue;
        const off = pb.address - sg.address;
        sg.blocks.forEach((bl, k) => { if (bl[0] === off && bl[3] !== 2) { ST.pinRow = r; ST.pinBlock = k; } });
      }
      ST.pinNote.textContent = ST.pinRow >= 0 ? "The pinned allocation is outlined in segment " + hex(segs[ST.pinRow].address) + "." : "The pinned allocation (" + hex(pb.address) + ") is not allocated at this moment.";
      if (scrollToPin && ST.pinRow >= 0) {
        const y = ST.pinRow * ST.rowH;
        if (y < scroll.scrollTop || y > scroll.scrollTop + viewH - ST.rowH) scroll.scrollTop = Math.max(0, y - viewH / 2);
      }
    } else ST.pinNote.textContent = "";
    const ctx = setupCanvas(canvas, W, viewH);
    const gut = 150, pw = W - gut - 8;
    ST.gut = gut; ST.pw = pw;
    const first = Math.floor(scroll.scrollTop / ST.rowH), last = Math.min(segs.length - 1, Math.ceil((scroll.scrollTop + viewH) / ST.rowH));
    ctx.clearRect(0, 0, W, viewH);
    ctx.font = "11px ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace";
    ctx.textBaseline = "middle";
    let drawn = 0;
    const COL = ["#4e79a7", "#e8a33d", "#e6e9ed"];
    for (let r = first; r <= last; r++) {
      const sg = segs[r];
      const y = r * ST.rowH - scroll.scrollTop;
      const scale = ST.fit ? pw / sg.size : pw / ST.maxSeg;
      const sw = Math.max(2, sg.size * scale);
      ctx.fillStyle = "#52606d";
      ctx.textAlign = "right";
      ctx.fillText(fmtBytes(sg.size), gut - 44, y + ST.rowH / 2);
      ctx.textAlign = "left";
      ctx.fillStyle = "#8a96a3";
      ctx.fillText((sg.pool === "small" ? "S" : sg.pool === "large" ? "L" : "?") + (sg.expandable ? "x" : "") + (sg.pool_id[0] || sg.pool_id[1] ? "p" : "") + (sg.stream ? " s" : ""), gut - 36, y + ST.rowH / 2);
      const bx = gut;
      ctx.fillStyle = "#f3f4f6";
      ctx.fillRect(bx, y + 2, sw, ST.rowH - 4);
      for (const bl of sg.blocks) {
        const x = bx + bl[0] * scale, w = bl[1] * scale;
        ctx.fillStyle = COL[bl[3]] || COL[2];
        ctx.fillRect(x, y + 2, Math.max(w, bl[3] === 2 ? 0 : 0.75), ST.rowH - 4);
        if (w > 4) { ctx.fillStyle = "#ffffff"; ctx.fillRect(x + w - 1, y + 2, 1, ST.rowH - 4); }
        drawn++;
      }
      ctx.strokeStyle = "#c9ced6"; ctx.lineWidth = 1;
      ctx.strokeRect(bx + 0.5, y + 2.5, sw - 1, ST.rowH - 5);
      if (r === ST.pinRow) {
        const bl = sg.blocks[ST.pinBlock];
        const x = bx + bl[0] * scale, w = Math.max(3, bl[1] * scale);
        ctx.strokeStyle = "#111827"; ctx.lineWidth = 2;
        ctx.strokeRect(x, y + 1, w, ST.rowH - 2);
        ctx.fillStyle = "rgba(255,255,255,0.35)"; ctx.fillRect(x, y + 2, w, ST.rowH - 4);
      }
    }
    ML.drawn.state_blocks = drawn;
  }
  // Where block k of segment row r is on screen (scrolled into view), for the browser tests.
  ML.blockPoint = function (r, k) {
    if (!ST || !ST.segs[r] || !ST.segs[r].blocks[k]) return null;
    const sg = ST.segs[r], bl = sg.blocks[k];
    ST.scroll.scrollTop = Math.max(0, r * ST.rowH - ST.rowH);
    drawState();
    ST.canvas.scrollIntoView({ block: "center" });
    const rect = ST.canvas.getBoundingClientRect();
    const scale = ST.fit ? ST.pw / sg.size : ST.pw / ST.maxSeg;
    return { x: rect.left + ST.gut + (bl[0] + bl[1] / 2) * scale, y: rect.top + r * ST.rowH - ST.scroll.scrollTop + ST.rowH / 2, width: bl[1] * scale };
  };
  function stMove(e) {
    if (!ST) return;
    const r = ST.canvas.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const row = Math.floor((py + ST.scroll.scrollTop) / ST.rowH);
    const sg = ST.segs[row];
    if (!sg) { hideTip(); return; }
    const scale = ST.fit ? ST.pw / sg.size : ST.pw / ST.maxSeg;
    const segInfo = [["segment", el("span", { class: "mono" }, hex(sg.address))], ["segment size", fmtBytes(sg.size)],
      ["pool", sg.pool + (sg.pool_id[0] || sg.pool_id[1] ? " (private pool " + sg.pool_id.join(",") + ")" : "") + (sg.expandable ? ", expandable" : "")],
      ["stream", hex(sg.stream)], ["blocks", fmtInt(sg.blocks.length)]];
    if (px < ST.gut) { showTip(el("div", { class: "tip" }, kv(segInfo)), e.clientX, e.clientY); return; }
    const off = (px - ST.gut) / scale;
    let k = -1;
    for (let j = 0; j < sg.blocks.length; j++) if (sg.blocks[j][0] <= off) k = j; else break;
    const bl = k >= 0 ? sg.blocks[k] : null;
    if (!bl || off >= bl[0] + bl[1]) { showTip(el("div", { class: "tip" }, kv(segInfo)), e.clientX, e.clientY); return; }
    const STATES = ["allocated", "pending free (freed, waiting for other streams)", "cached free"];
    const bn = (sg.block_notes || []).find((x) => x[0] === k);
    const note = bn ? ST.m.state.notes[bn[1]] : null;
    showTip(el("div", { class: "tip" },
      el("div", { class: "tip-title" }, el("i", { class: "sw " + ["st-alloc", "st-pending", "st-free"][bl[3]] }), el("b", null, fmtBytes(bl[1])), " ", STATES[bl[3]]),
      kv([["address", el("span", { class: "mono" }, hex(sg.address + bl[0]))],
        ["size", fmtBytes(bl[1]) + " (" + fmtInt(bl[1]) + " bytes)"],
        bl[3] !== 2 ? ["requested", fmtBytes(bl[2])] : null,
        ["segment", el("span", { class: "mono" }, hex(sg.address) + " · " + fmtBytes(sg.size) + " · " + sg.pool)]].concat(noteRows(note))),
      bl[3] !== 2 ? stackList(bl[4] >= 0 ? bl[4] : null) : null), e.clientX, e.clientY);
  }
  function renderFrag(m) {
    const f = m.frag;
    const cols = [f.total].concat(f.pools);
    const private_ = (p) => p.pool_id[0] || p.pool_id[1];
    const head = (p, i) => i === 0 ? el("th", { class: "num" }, "device", el("div", { class: "muted small" }, "all pools"))
      : el("th", { class: "num", title: p.pool + " pool, stream " + hex(p.stream) + (private_(p) ? ", private pool " + p.pool_id.join(",") : "") },
        p.pool + (private_(p) ? " (private)" : ""), el("div", { class: "muted small" }, "stream " + hex(p.stream)));
    const rows = [["segments", "segments", fmtInt], ["reserved", "reserved_bytes", fmtBytes], ["allocated", "allocated_bytes", fmtBytes],
      ["free (cached)", "free_bytes", fmtBytes], ["pending free", "pending_free_bytes", fmtBytes], ["largest free block", "largest_free_block_bytes", fmtBytes],
      ["fragmentation", "fragmentation", fmtPct], ["stranded free", "stranded_free_bytes", fmtBytes], ["releasable", "releasable_bytes", fmtBytes],
      ["largest request without new memory", "largest_request_without_new_memory_bytes", fmtBytes]]
      .filter(([, k]) => k !== "pending_free_bytes" || cols.some((p) => p[k]));
    return el("div", null,
      el("div", { class: "frag-head" }, el("h3", null, "Fragmentation at this moment")),
      el("div", { class: "table-wrap" }, el("table", { class: "grid frag-table" },
        el("thead", null, el("tr", null, el("th"), cols.map(head))),
        el("tbody", null, rows.map(([label, k, fmt]) => el("tr", null, el("th", { scope: "row" }, label),
          cols.map((p) => el("td", { class: "num", title: typeof p[k] === "number" && fmt === fmtBytes ? fmtInt(p[k]) + " bytes" : null }, fmt(p[k])))))))),
      f.reading ? el("p", { "data-testid": "frag-reading", class: f.reading.matters ? null : "muted" }, f.reading.words) : null,
      el("p", { class: "muted small" }, "fragmentation = 1 − largest free block / free (how scattered the cached free bytes are, not whether they matter); stranded: free inside partly used segments; releasable: what empty_cache() could return."));
  }

  // 5. top table
  let TOP = null;
  function renderTop() {
    const s = sections.top;
    const m = moment();
    if (!m) { fill(s, heading("Top sites")); TOP = null; return; }
    const t = m.top;
    TOP = { m: m, sort: TOP ? TOP.sort : { key: "bytes", dir: -1 }, filter: TOP ? TOP.filter : "", open: new Set(), tbody: el("tbody") };
    const filter = el("input", { type: "search", id: "top-filter", placeholder: "filter sites and frames…", value: TOP.filter,
      oninput: (e) => { TOP.filter = e.target.value; fillTop(); } });
    const cpp = el("input", { type: "checkbox", id: "show-cpp", checked: S.showCpp, onchange: (e) => { S.showCpp = e.target.checked; toggled(); } });
    const torch = el("input", { type: "checkbox", id: "show-torch", checked: S.showTorch, onchange: (e) => { S.showTorch = e.target.checked; toggled(); } });
    const th = (key, label, cls) => el("th", { class: (cls || "") + " sortable", "data-key": key, onclick: () => {
      TOP.sort = TOP.sort.key === key ? { key: key, dir: -TOP.sort.dir } : { key: key, dir: key === "site" ? 1 : -1 };
      fillTop();
    } }, label, el("span", { class: "arrow" }));
    TOP.head = el("tr", null, el("th", { class: "exp" }), th("site", "site"), th("bytes", "bytes", "num"), th("share", "share", "num"), th("count", "allocations", "num"));
    fill(s, 
      heading("Top sites", momentLabel(m) + (m.at.event_index >= 0 ? " · after event " + fmtInt(m.at.event_index) : "") + " · " + fmtBytes(t.total) + " in " + fmtInt(t.groups) + " sites"),
      el("div", { class: "toolbar" }, filter,
        el("label", { class: "check" }, cpp, " C++ frames"),
        el("label", { class: "check" }, torch, " PyTorch-internal frames"),
        el("span", { class: "muted", id: "view-name" }, "stacks and flamegraph: " + VIEW_NAMES[flameView()])),
      el("div", { class: "table-wrap top-scroll" }, el("table", { class: "grid top-table" }, el("thead", null, TOP.head), TOP.tbody)),
      m.by_metadata ? el("div", { id: "by-metadata" }, el("h3", null, "Live bytes by user metadata"),
        el("p", { class: "muted small" }, "Grouped by the user_metadata of each allocation's alloc entry (torch.cuda.memory._set_memory_metadata); memlens top --by metadata[:KEY] groups by one key of it."),
        el("div", { class: "table-wrap" }, el("table", { class: "grid compact md-table" },
          el("thead", null, el("tr", null, el("th", null, "user metadata"), el("th", { class: "num" }, "bytes"), el("th", { class: "num" }, "share"), el("th", { class: "num" }, "allocations"))),
          el("tbody", null, m.by_metadata.sites.map((r) => el("tr", { "data-metadata": r.site }, el("td", { class: "mono" }, r.site), bytesCell(r.bytes), shareCell(r.share), el("td", { class: "num" }, fmtInt(r.count)))),
            m.by_metadata.other ? el("tr", { class: "other-row" }, el("td", null, m.by_metadata.other.site), bytesCell(m.by_metadata.other.bytes), shareCell(m.by_metadata.other.share), el("td", { class: "num" }, fmtInt(m.by_metadata.other.count))) : null)))) : null,
      t.notes && t.notes.length ? el("ul", { class: "plain muted" }, t.notes.map((x) => el("li", null, x))) : null);
    fillTop();
  }
  function toggled() {
    const v = document.getElementById("view-name");
    if (v) v.textContent = "stacks and flamegraph: " + VIEW_NAMES[flameView()];
    fillTop();
    renderPinned();
    renderFlame();
  }
  function fillTop() {
    if (!TOP) return;
    const t = TOP.m.top;
    const q = TOP.filter.trim().toLowerCase();
    let rows = t.sites.map((r, i) => ({ r: r, i: i }));
    if (q) rows = rows.filter(({ r, i }) => r.site.toLowerCase().includes(q) ||
      (DATA.stacks[t.row_stacks[i]] || []).some((f) => frameShown(f) && DATA.frames[f].label.toLowerCase().includes(q)));
    const { key, dir } = TOP.sort;
    rows.sort((a, b) => {
      const x = a.r[key], y = b.r[key];
      return (typeof x === "string" ? x.localeCompare(y) : x - y) * dir || a.i - b.i;
    });
    for (const thEl of TOP.head.querySelectorAll("th.sortable")) {
      thEl.querySelector(".arrow").textContent = thEl.dataset.key === key ? (dir > 0 ? " ▲" : " ▼") : "";
      thEl.setAttribute("aria-sort", thEl.dataset.key === key ? (dir > 0 ? "ascending" : "descending") : "none");
    }
    const out = [];
    for (const { r, i } of rows) {
      const open = TOP.open.has(i);
      const tr = el("tr", { class: "row", "data-site": r.site, onclick: () => { if (TOP.open.has(i)) TOP.open.delete(i); else TOP.open.add(i); fillTop(); } },
        el("td", { class: "exp" }, open ? "▾" : "▸"),
        el("td", { class: "mono site", title: r.evidence ? r.site + "\n" + r.evidence : r.site }, path(shownSite(r.site)),
          r.context ? el("div", { class: "row-note", "data-testid": "site-context" }, "via ", path(shownSite(r.context))) : null,
          (r.annotations || []).slice(0, 3).map((a) => el("div", { class: "row-note", "data-testid": "row-annotation" }, "annotated \u201c" + a.text + "\u201d on " + fmtInt(a.count) + " (" + fmtBytes(a.bytes) + ")"))),
        bytesCell(r.bytes),
        shareCell(r.share),
        el("td", { class: "num" }, fmtInt(r.count)));
      out.push(tr);
      // memory alive before the trace with no stack: what the category rules say instead of a stack
      if (open) out.push(el("tr", { class: "stack-row" }, el("td"), el("td", { colspan: 4 }, r.predates_trace
        ? el("div", { class: "stack muted" }, (r.likely_kind ? "Likely " + r.likely_kind.replace(/_/g, " ") + ": " : "") + r.evidence + ".")
        : stackList(t.row_stacks[i]))));
    }
    if (!rows.length) out.push(el("tr", null, el("td"), el("td", { colspan: 4, class: "muted" }, q ? "No site matches the filter." : "Nothing is live at this moment.")));
    if (t.other) out.push(el("tr", { class: "other-row" }, el("td"), el("td", { class: "site" }, t.other.site), bytesCell(t.other.bytes), el("td", { class: "num" }, fmtPct(t.other.share)), el("td", { class: "num" }, fmtInt(t.other.count))));
    fill(TOP.tbody, ...out);
    markTopRows();
  }
  function markTopRows() {
    if (!TOP) return;
    const pb = pinnedBand();
    for (const tr of TOP.tbody.querySelectorAll("tr.row")) tr.classList.toggle("pinned", !!pb && tr.dataset.site === pb.site);
    // Bring the pinned row into the table's own scroll area (never the page's).
    const row = TOP.tbody.querySelector("tr.pinned");
    const wrap = row && row.closest(".top-scroll");
    if (wrap) {
      const top = row.getBoundingClientRect().top - wrap.getBoundingClientRect().top + wrap.scrollTop;
      if (top < wrap.scrollTop || top + row.offsetHeight > wrap.scrollTop + wrap.clientHeight) wrap.scrollTop = top - wrap.clientHeight / 3;
    }
  }

  // 5b. flamegraph
  let FL = null;
  const FROW = 18;
  function renderFlame() {
    const s = sections.flame;
    const m = moment();
    ML.drawn.flame_nodes = 0;
    if (!m) { fill(s, heading("Flamegraph")); FL = null; return; }
    const view = flameView();
    const root = m.flame[view];
    // columns in pre-order: node i's subtree is [i, end[i]); x is its first byte
    const n = root.frame.length;
    const f = root.frame, v = root.value, d = root.depth, par = root.parent;
    const x = new Float64Array(n), end = new Int32Array(n), next = new Float64Array(n);
    const open = [];
    let maxD = 0;
    for (let i = 0; i < n; i++) {
      while (open.length && d[open[open.length - 1]] >= d[i]) end[open.pop()] = i;
      open.push(i);
      const p = par[i];
      if (p >= 0) { x[i] = next[p]; next[p] += v[i]; }
      next[i] = x[i];
      if (d[i] > maxD) maxD = d[i];
    }
    while (open.length) end[open.pop()] = n;
    const prevQ = FL ? FL.query : "";
    FL = { m: m, view: view, f: f, v: v, x: x, d: d, par: par, end: end, maxD: maxD, zoom: 0, query: prevQ, match: null, rects: [] };
    const canvas = el("canvas", { class: "fl-canvas" });
    FL.canvas = canvas;
    const search = el("input", { type: "search", id: "flame-search", placeholder: "search frames…", value: prevQ,
      oninput: (e) => { FL.query = e.target.value; flameSearch(); drawFlame(); } });
    FL.matchEl = el("span", { id: "flame-match", class: "muted", "aria-live": "polite" });
    FL.crumb = el("span", { class: "crumb muted" });
    fill(s, 
      heading("Flamegraph", momentLabel(m) + " · " + fmtBytes(m.flame.total) + " live · " + VIEW_NAMES[view]),
      el("div", { class: "toolbar" }, search, FL.matchEl,
        el("button", { class: "btn", id: "flame-reset", onclick: () => { FL.zoom = 0; drawFlame(); } }, "Reset zoom"), FL.crumb),
      el("div", { class: "fl-wrap" }, canvas),
      el("div", { class: "legend" },
        el("span", null, el("i", { class: "sw", style: "background:" + "hsl(30,72%,66%)" }), "user code"),
        el("span", null, el("i", { class: "sw", style: "background:" + "hsl(172,32%,60%)" }), "libraries"),
        el("span", null, el("i", { class: "sw", style: "background:" + "hsl(352,40%,75%)" }), "PyTorch internals"),
        el("span", null, el("i", { class: "sw", style: "background:" + "hsl(215,24%,74%)" }), "C++"),
        el("span", null, el("i", { class: "sw sw-match" }), "search match"),
        el("span", { class: "muted" }, "root at top; width = live bytes; click a frame to zoom; callees lighter than " + fmtBytes(m.flame.pruned_below_bytes) + " are folded into their caller")));
    canvas.addEventListener("mousemove", guard(flMove));
    canvas.addEventListener("mouseleave", guard(hideTip));
    canvas.addEventListener("click", guard(flClick));
    flameSearch();
    drawFlame();
  }
  function flLabel(i) {
    if (i === 0) return "all live memory";
    const f = FL.f[i];
    return f < 0 ? "<no frames>" : DATA.frames[f].label;
  }
  function flameSearch() {
    const q = FL.query.trim().toLowerCase();
    if (!q) { FL.match = null; FL.matchEl.textContent = ""; ML.flameMatch = null; return; }
    const match = new Uint8Array(FL.f.length);
    let nodes = 0, bytes = 0;
    for (let i = 1; i < FL.f.length; i++) {
      const f = FL.f[i];
      const hit = f >= 0 ? (DATA.frames[f].label.toLowerCase().includes(q) || DATA.frames[f].file.toLowerCase().includes(q)) : "<no frames>".includes(q);
      if (hit) { match[i] = 1; nodes++; }
    }
    // bytes: matched nodes without a matched ancestor (nested matches are inside them)
    for (let i = 1; i < FL.f.length; ) {
      if (match[i]) { bytes += FL.v[i]; i = FL.end[i]; } else i++;
    }
    FL.match = match;
    const total = FL.v[0];
    FL.matchEl.textContent = nodes ? nodes + " matching frame" + (nodes === 1 ? "" : "s") + " · " + fmtBytes(bytes) + " (" + fmtPct(total ? bytes / total : 0) + " of " + fmtBytes(total) + ")" : "no frame matches";
    ML.flameMatch = { query: FL.query, nodes: nodes, bytes: bytes, text: FL.matchEl.textContent };
  }
  function pinnedPath() {
    const pb = pinnedBand();
    if (!pb || !FL) return null;
    const frames = (DATA.stacks[pb.stack] || []).slice().reverse().filter(frameShown);
    const path = [0];
    let at = 0;
    const seq = frames.length ? frames : [-1];
    for (const fr of seq) {
      let found = -1;
      for (let c = at + 1; c < FL.end[at]; c = FL.end[c]) if (FL.f[c] === fr) { found = c; break; }
      if (found < 0) break;
      path.push(found);
      at = found;
    }
    return path.length > 1 ? path : null;
  }
  function drawFlame() {
    if (!FL) return;
    const wrap = FL.canvas.parentElement;
    const W = Math.max(300, wrap.clientWidth || 800);
    const H = (FL.maxD + 1) * FROW + 2;
    const ctx = setupCanvas(FL.canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    ctx.font = "11.5px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
    ctx.textBaseline = "middle";
    const z = FL.zoom, zx = FL.x[z], zv = FL.v[z] || 1, k = W / zv;
    const rects = (FL.rects = []);
    const match = FL.match;
    const path = pinnedPath();
    const onPath = new Set(path || []);
    const box = (i, x, w) => {
      const y = FL.d[i] * FROW;
      let color = i === 0 ? "#e4e7eb" : frameColor(FL.f[i]);
      ctx.globalAlpha = 1;
      if (match) { if (match[i]) color = "#d946ef"; else ctx.globalAlpha = 0.45; }
      ctx.fillStyle = color;
      ctx.fillRect(x, y, Math.max(w - 1, 0.5), FROW - 1);
      ctx.globalAlpha = 1;
      if (w > 30) {
        ctx.fillStyle = match && match[i] ? "#ffffff" : "#1f2933";
        const t = fitText(ctx, flLabel(i) + (i === 0 ? " · " + fmtBytes(FL.v[0]) : ""), w - 8);
        if (t) ctx.fillText(t, x + 4, y + FROW / 2);
      }
      if (onPath.has(i)) { ctx.strokeStyle = "#111827"; ctx.lineWidth = 2; ctx.strokeRect(x + 1, y + 1, Math.max(w - 3, 1), FROW - 3); }
      rects.push([i, x, w, FL.d[i]]);
    };
    // ancestors of the zoomed node, full width
    const anc = [];
    for (let a = z; a >= 0; a = FL.par[a]) anc.push(a);
    for (const a of anc) box(a, 0, W);
    let drawn = anc.length;
    // Callees under a pixel wide are not dropped: adjacent ones of one caller are painted as
    // one grey box at their depth (at least a pixel wide), which names them on hover.
    const merged = (FL.merged = []);
    const pend = [];
    const paint = (p, depth) => {
      const y = depth * FROW;
      ctx.globalAlpha = match ? 0.45 : 1;
      ctx.fillStyle = "#aab2bd";
      ctx.fillRect(p.x, y, Math.max(1, p.w), FROW - 1);
      ctx.globalAlpha = 1;
      merged.push(p);
      rects.push([-merged.length, p.x, Math.max(1, p.w), depth]);
    };
    const flushFrom = (depth) => {
      for (let q = pend.length - 1; q >= depth; q--) if (pend[q]) { paint(pend[q], q); pend[q] = null; }
    };
    for (let i = z + 1; i < FL.end[z]; ) {
      const w = FL.v[i] * k, x = (FL.x[i] - zx) * k, depth = FL.d[i];
      if (w < 1) {
        flushFrom(depth + 1);
        const p = pend[depth];
        if (p && p.parent === FL.par[i]) { p.w = x + w - p.x; p.n++; p.bytes += FL.v[i]; }
        else { if (p) paint(p, depth); pend[depth] = { x: x, w: w, n: 1, bytes: FL.v[i], parent: FL.par[i] }; }
        i = FL.end[i];
        continue;
      }
      flushFrom(depth);
      box(i, x, w);
      drawn++;
      i++;
    }
    flushFrom(0);
    ML.drawn.flame_nodes = drawn;
    ML.drawn.flame_merged = merged.length;
    FL.crumb.textContent = z ? "zoomed into " + flLabel(z) : "";
  }
  function flHit(e) {
    const r = FL.canvas.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const depth = Math.floor(py / FROW);
    for (const [i, x, w, d] of FL.rects) if (d === depth && px >= x && px < x + w) return i < 0 ? i - 1 : i;
    return -1;
  }
  function flMove(e) {
    if (!FL) return;
    const i = flHit(e);
    if (i <= -2) {
      const p = FL.merged[-i - 2];
      showTip(el("div", { class: "tip" },
        el("div", { class: "tip-title" }, el("b", null, fmtInt(p.n) + " callee" + (p.n === 1 ? "" : "s") + " of " + flLabel(p.parent))),
        el("p", { class: "muted" }, "Each under a pixel wide at this zoom, so painted together; click their caller to zoom in."),
        kv([["bytes", fmtBytes(p.bytes) + " (" + fmtInt(p.bytes) + ")"], ["share", fmtPct(FL.v[0] ? p.bytes / FL.v[0] : 0) + " of all live"]])), e.clientX, e.clientY);
      return;
    }
    if (i < 0) { hideTip(); return; }
    const f = FL.f[i];
    const fr = f >= 0 ? DATA.frames[f] : null;
    const own = FL.v[i] - (function () { let s = 0; for (let c = i + 1; c < FL.end[i]; c = FL.end[c]) s += FL.v[c]; return s; })();
    showTip(el("div", { class: "tip" },
      el("div", { class: "tip-title" }, el("b", null, flLabel(i))),
      kv([fr ? ["location", el("span", { class: "mono" }, path(fr.file + (fr.line >= 0 ? ":" + fr.line : "")))] : null,
        fr ? ["kind", fr.kind] : null,
        ["bytes", fmtBytes(FL.v[i]) + " (" + fmtInt(FL.v[i]) + ")"],
        ["share", fmtPct(FL.v[0] ? FL.v[i] / FL.v[0] : 0) + " of all live" + (FL.zoom && FL.v[FL.zoom] ? ", " + fmtPct(FL.v[i] / FL.v[FL.zoom]) + " of the zoomed frame" : "")],
        own > 0 && i !== 0 ? ["own", fmtBytes(own)] : null])), e.clientX, e.clientY);
  }
  function flClick(e) {
    let i = flHit(e);
    if (i <= -2) i = FL.merged[-i - 2].parent;
    if (i < 0) return;
    FL.zoom = i === FL.zoom ? Math.max(0, FL.par[i]) : i;
    drawFlame();
  }

  // 6. leaks, categories, summary
  // The leaks analysis's judgement of a device without a finding: judged and nothing grows, or
  // "cannot judge" with why and what to record (never "no leak found" when it could not judge).
  function leaksJudgement(j) {
    if (j && j.state === "none") return el("p", { class: "judgement", "data-state": j.state }, "No leak or retained graph: " + j.why + ".");
    return judgementLine(j, "leaks-judgement", "");
  }
  // Any analysis's judgement (leaks, a kind of growth, categories, capacity) as one line:
  // "Cannot judge: why. Record what." or the reason itself, after `label`.
  function judgementLine(j, testid, label) {
    if (!j) return null;
    const attrs = (cls) => ({ class: cls, "data-state": j.state, "data-testid": testid });
    if (j.state === "cannot_judge") {
      return el("p", attrs("judgement cannot-judge"), label ? el("b", null, label) : null,
        el("b", null, "Cannot judge: "), rich(j.why), j.record ? el("span", null, ". Record ", rich(j.record), ".") : ".");
    }
    return el("p", attrs("judgement"), label ? el("b", null, label) : null, rich(j.why + "."));
  }
  // Each kind of growth (leak, retained graph) on its own when growth was found (judged
  // without growth, or not judged, both kinds are what the judgement says), as the CLI does.
  function leaksKinds(src) {
    if (!src || !src.leak || !src.retained_graph || src.judgement.state !== "found") return null;
    const word = (j) => j.state === "found" ? "found" : j.state === "none" ? "none" : "cannot judge: " + j.why + (j.record ? "; record " + j.record : "");
    return el("p", { class: "judgement kinds", "data-testid": "leaks-kinds", "data-leak": src.leak.state, "data-retained-graph": src.retained_graph.state },
      rich("Leak: " + word(src.leak) + ". Retained graph: " + word(src.retained_graph) + "."));
  }
  function renderLeaks() {
    const s = sections.leaks;
    const d = devId();
    const found = DATA.leaks.findings.filter((f) => f.device === d);
    const dl = (DATA.leaks.devices || []).find((x) => x.device === d);
    const notes = dl ? dl.notes : [];
    const steps = dl && dl.steps ? dl.steps : [];
    fill(s, heading("Leaks and retained graphs", devName(d) + (dl && dl.source ? " · steps from " + dl.source + (dl.marker ? " (" + dl.marker + ")" : "") + ", " + steps.length + " found" : "")),
      found.length ? el("div", { class: "table-wrap" }, el("table", { class: "grid" },
        el("thead", null, el("tr", null, el("th", null, "kind"), el("th", null, "site"), el("th", { class: "num" }, "growth per step"), el("th", { class: "num" }, "steps"), el("th", { class: "num" }, "live at end"), el("th", { class: "num" }, "fit R²"))),
        el("tbody", null, found.map((f) => [
          el("tr", null, el("td", null, el("span", { class: "badge k-" + f.kind }, f.kind.replace(/_/g, " "))), el("td", { class: "mono site" }, path(shownSite(f.site))), bytesCell(f.bytes_per_step), el("td", { class: "num" }, fmtInt(f.steps)), bytesCell(f.live_bytes_at_end), el("td", { class: "num" }, f.fit_r2 != null ? f.fit_r2.toFixed(3) : "–")),
          el("tr", { class: "fix-row" }, el("td"), el("td", { colspan: 5 }, el("span", { class: "fix-label" }, "Fix: "), rich(f.fix)))])))) :
        leaksJudgement(dl ? dl.judgement : DATA.leaks.judgement),
      leaksKinds(dl || DATA.leaks),
      notes.length ? el("ul", { class: "plain muted" }, notes.map((t) => el("li", null, rich(t)))) : null,
      !dl ? el("p", { class: "muted" }, "No leak search: this device has no trace.") : null);
  }
  // 6b. private pools: reserved (line) and active (area) bytes over the trace per (pool, stream)
  const POOL_ACTIVE = "#59a14f", POOL_RESERVED = "#1f2937", POOL_W = 360, POOL_H = 84;
  function renderPools() {
    const s = sections.pools;
    if (!s) return;
    const d = devId();
    const dp = (DATA.pools || []).find((x) => x.device === d);
    ML.drawn.pools = [];
    if (!dp) { fill(s, heading("Private pools"), el("p", { class: "muted" }, "No trace of this device: its pools are in the summary's final state.")); return; }
    const tl = devPage().timeline;
    const events = tl ? tl.events : 0;
    const top = Math.max(1, ...dp.pools.map((p) => Math.max(p.peak_reserved_bytes, p.peak_active_bytes)));
    const kindText = { default: "default pool", mempool: "MemPool", graph: "CUDA graph pool", unknown: "unknown pool" };
    const rows = dp.pools.map((p, i) => {
      const canvas = el("canvas", { class: "pool-canvas", "data-pool": String(i) });
      return { p: p, canvas: canvas, tr: el("tr", { "data-pool": String(i) },
        el("td", null, el("b", null, kindText[p.kind] || p.kind), el("div", { class: "muted small mono" }, (p.pool_id ? "pool " + p.pool_id.join(",") : "pool ?") + " · stream " + hex(p.stream))),
        el("td", { class: "num" }, fmtInt(p.segments)),
        bytesCell(p.reserved_bytes), bytesCell(p.peak_reserved_bytes), bytesCell(p.active_bytes), bytesCell(p.peak_active_bytes),
        el("td", { class: "num", title: p.ghosts && p.ghosts.length ? p.ghosts.map((g) => hex(g.address) + " " + fmtBytes(g.size) + " " + g.site).join("\n") : null }, p.ghost_blocks ? fmtInt(p.ghost_blocks) + " (" + fmtBytes(p.ghost_bytes) + ")" : "–"),
        el("td", { class: "pool-chart" }, canvas)) };
    });
    fill(s, heading("Private pools", devName(d) + " · " + fmtInt(dp.pools.length) + " (pool, stream) pairs · " + (dp.ghost_blocks ? fmtInt(dp.ghost_blocks) + " ghost blocks (" + fmtBytes(dp.ghost_bytes) + ")" : "no ghost block")),
      el("div", { class: "table-wrap" }, el("table", { class: "grid pools-table" },
        el("thead", null, el("tr", null, ["pool", "segments", "reserved at end", "peak reserved", "active at end", "peak active", "ghost blocks", "over the trace (scale " + fmtBytes(top) + ")"].map((h, i) => el("th", { class: i > 0 && i < 7 ? "num" : null }, h)))),
        el("tbody", null, rows.map((r) => r.tr)))),
      el("div", { class: "legend" }, el("span", null, el("i", { class: "sw", style: "background:" + POOL_ACTIVE }), "active (allocated, requested)"), el("span", null, el("i", { class: "sw", style: "background:" + POOL_RESERVED }), "reserved"),
        el("span", { class: "muted" }, "ghost blocks: live at the dump, their allocation never recorded (a graph replay's or a pool's older memory)")),
      (dp.notes || []).length ? el("ul", { class: "plain muted" }, dp.notes.map((t) => el("li", null, rich(t)))) : null);
    for (const r of rows) ML.drawn.pools.push(drawPool(r.canvas, r.p.series, events, top));
  }
  function drawPool(canvas, series, events, top) {
    const W = POOL_W, H = POOL_H;
    const ctx = setupCanvas(canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    const n = events + 1; // the states before the first event and after each, each a column run
    const x = (ev) => Math.round((ev + 1) / n * W);
    const y = (v) => H - Math.round(v / top * (H - 2));
    let drawn = 0;
    ctx.fillStyle = POOL_ACTIVE;
    for (let i = 0; i < series.length; i++) {
      const p = series[i], x0 = x(p[0]), x1 = i + 1 < series.length ? x(series[i + 1][0]) : W;
      if (p[2] > 0 && x1 > x0) { ctx.fillRect(x0, y(p[2]), x1 - x0, H - y(p[2])); drawn++; }
    }
    ctx.strokeStyle = POOL_RESERVED; ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 0; i < series.length; i++) {
      const p = series[i], x0 = x(p[0]), x1 = i + 1 < series.length ? x(series[i + 1][0]) : W, yy = y(p[1]) + 0.5;
      if (i === 0) ctx.moveTo(x0, yy); else ctx.lineTo(x0, yy);
      ctx.lineTo(x1, yy);
    }
    ctx.stroke();
    return { width: W, height: H, scale_bytes: top, steps: drawn };
  }
  function renderCategories() {
    const s = sections.categories;
    const d = devId();
    const c = (DATA.categories.devices || []).find((x) => x.device === d);
    if (!c) { fill(s, heading("Categories"), el("p", { class: "muted" }, "No categories for this device.")); return; }
    fill(s, heading("Categories", "at the " + DATA.categories.moment + (c.at && c.at.event_index >= 0 ? " (after event " + fmtInt(c.at.event_index) + ")" : "") + " · " + fmtBytes(c.live_requested_bytes) + " live"),
      el("div", { class: "table-wrap" }, el("table", { class: "grid" },
        el("thead", null, el("tr", null, el("th", null, "category"), el("th", { class: "num" }, "bytes"), el("th", { class: "num" }, "share"), el("th", { class: "num" }, "allocations"), el("th", null, "confidence"), el("th", null, "rules"))),
        el("tbody", null, c.categories.map((k) => el("tr", null,
          el("td", null, el("b", null, k.category)), bytesCell(k.bytes),
          shareCell(k.share),
          el("td", { class: "num" }, fmtInt(k.count)),
          el("td", null, el("span", { class: "conf conf-" + k.confidence }, k.confidence)),
          el("td", { class: "rules" }, el("ul", { class: "plain" }, (k.rules || []).map((r) => el("li", null, r.rule, el("span", { class: "muted" }, " · " + fmtBytes(r.bytes) + " · " + r.confidence)))))))))),
      c.judgement && c.judgement.state !== "found" ? judgementLine(c.judgement, "categories-judgement", "") : null,
      c.notes && c.notes.length ? el("ul", { class: "plain muted" }, c.notes.map((t) => el("li", null, rich(t)))) : null);
  }
  function renderSummary() {
    const s = sections.summary;
    const sum = DATA.summary;
    const cols = [["segments", "segments", fmtInt], ["blocks", "blocks", fmtInt], ["reserved", "reserved_bytes", fmtBytes], ["allocated", "allocated_bytes", fmtBytes],
      ["requested", "requested_bytes", fmtBytes], ["rounding waste", "rounding_waste_bytes", fmtBytes], ["pending free", "pending_free_bytes", fmtBytes],
      ["inactive", "inactive_bytes", fmtBytes], ["largest inactive", "largest_inactive_block_bytes", fmtBytes], ["trace entries", "trace_entries", fmtInt],
      ["expandable", "expandable_segments", fmtInt], ["private pool segs", "private_pool_segments", fmtInt]];
    const d = devId();
    const dev = (sum.devices || []).find((x) => x.device === d);
    const settings = sum.allocator_settings;
    fill(s, heading("Summary", fmtInt(sum.distinct_frames) + " distinct frames · " + fmtInt(sum.distinct_stacks) + " stacks · " + fmtInt(sum.annotations) + " annotations"),
      el("div", { class: "table-wrap" }, el("table", { class: "grid" },
        el("thead", null, el("tr", null, el("th", null, "device"), cols.map(([l]) => el("th", { class: "num" }, l)))),
        el("tbody", null, (sum.devices || []).map((x) => el("tr", { class: x.device === d ? "current" : null }, el("td", null, devName(x.device)), cols.map(([, k, f]) => el("td", { class: "num" }, f(x[k])))))))),
      dev && dev.pools && dev.pools.length ? el("div", null, el("h3", null, "Pools of " + devName(d) + " (final state)"),
        el("table", { class: "grid compact" },
          el("thead", null, el("tr", null, ["pool", "private pool", "stream", "segments", "reserved", "allocated", "inactive", "largest inactive"].map((h, i) => el("th", { class: i > 2 ? "num" : null }, h)))),
          el("tbody", null, dev.pools.map((p) => el("tr", null, el("td", null, p.pool), el("td", null, p.pool_id[0] || p.pool_id[1] ? p.pool_id.join(",") : "–"), el("td", { class: "mono" }, hex(p.stream)),
            el("td", { class: "num" }, fmtInt(p.segments)), bytesCell(p.reserved_bytes), bytesCell(p.allocated_bytes), bytesCell(p.inactive_bytes), bytesCell(p.largest_inactive_block_bytes)))))) : null,
      dev && dev.trace ? el("p", { class: "muted" }, "Trace of " + devName(d) + ": " + Object.entries(dev.trace.by_action || {}).map(([k, v]) => k + " " + fmtInt(v)).join(" · ")) : null,
      sum.host ? el("div", { id: "host-memory" }, el("h3", null, "Pinned host memory (its own pool; no device's figures include it)"),
        el("table", { class: "grid compact" },
          el("thead", null, el("tr", null, ["segments", "blocks", "reserved", "allocated", "requested", "pending free", "inactive", "largest inactive", "trace entries", "peak live"].map((h) => el("th", { class: "num" }, h)))),
          el("tbody", null, el("tr", null, el("td", { class: "num" }, fmtInt(sum.host.segments)), el("td", { class: "num" }, fmtInt(sum.host.blocks)),
            bytesCell(sum.host.reserved_bytes), bytesCell(sum.host.allocated_bytes), bytesCell(sum.host.requested_bytes), bytesCell(sum.host.pending_free_bytes),
            bytesCell(sum.host.inactive_bytes), bytesCell(sum.host.largest_inactive_block_bytes), el("td", { class: "num" }, fmtInt(sum.host.trace_entries)),
            sum.host.peak_live_bytes == null ? el("td", { class: "num muted" }, "–") : bytesCell(sum.host.peak_live_bytes))))) : null,
      settings ? el("div", null, el("h3", null, "Allocator settings"),
        el("dl", { class: "kv settings" }, Object.entries(settings).map(([k, v]) => [el("dt", { class: "mono" }, k),
          el("dd", { class: "mono" }, v === "" ? "(empty)" : typeof v === "object" && v ? (Object.entries(v).filter(([, x]) => x).map(([a, b]) => a + ":" + b).join(", ") || "all 0") : String(v))]))) :
        el("p", { class: "muted" }, "The snapshot records no allocator settings."));
  }

  // ---------------------------------------------------------------- assembly
  function renderMoment() {
    const dp = devPage();
    const m = dp && dp.moments[S.moment];
    ML.moment = m ? m.name : null;
    ML.momentShown = m ? { name: m.name, event_index: m.at.event_index, live_bytes: m.live_bytes } : null;
    renderState();
    renderTop();
    renderFlame();
    if (S.tl) drawTimeline();
  }
  function renderDevice() {
    hideTip();
    renderAdvice();
    renderTimeline();
    renderMoment();
    renderLeaks();
    try { renderPools(); } catch (e) { recordError(e); }
    renderCategories();
    renderSummary();
  }

  function main() {
    const app = document.getElementById("app");
    const ids = ["header", "oom", "advice", "timeline", "state", "top", "flame", "leaks", "pools", "categories", "summary"]
      .filter((id) => (id !== "oom" || DATA.oom) && (id !== "pools" || (DATA.pools || []).length));
    fill(app, ...ids.map((id) => section(id)));
    document.body.appendChild(tooltip);
    ML.device = devId();
    const steps = [renderHeader, renderOom, renderDevice];
    for (const f of steps) { try { f(); } catch (e) { recordError(e); } }
    window.addEventListener("mouseup", guard(tlUp));
    let t = null;
    window.addEventListener("resize", guard(() => {
      clearTimeout(t);
      t = setTimeout(guard(() => { drawTimeline(); drawState(); drawFlame(); }), 120);
    }));
    window.addEventListener("wheel", hideTip, { passive: true });
    window.addEventListener("keydown", guard((e) => { if (e.key === "Escape") { hideTip(); if (S.pinned != null) pin(null); } }));
    const hw = hashWindow();
    const done = () => { ML.readyMs = Math.round(performance.now() - started); ML.ready = true; };
    if (hw && S.tl) zoomTo(hw[0], hw[1]).catch(recordError).then(done);
    else done();
  }
  try { main(); } catch (e) { recordError(e); ML.ready = true; }
})();
