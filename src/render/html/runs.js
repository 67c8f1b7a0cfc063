"use strict";
// memlens report A B ...: draws the runs page in #memlens-data (compose::runs::RunsPage).
// Every number shown comes from the analyses; this script lays the runs out on the chosen
// axis, formats and hit-tests.
(function () {
  const ML = (window.memlens = {
    ready: false,
    errors: [],
    // After every draw: {axis, layout, mode, width, height, x_max, scale_bytes, canvases}.
    plot: null,
    // The moment pair shown (its index in pair.moments), or the run shown (many runs).
    moment: null,
    run: null,
    // Client coordinates of moment pair i on the plot (for drivers), or null.
    momentPoint: function () { return null; },
  });
  const DATA = JSON.parse(document.getElementById("memlens-data").textContent);
  const SERVE = JSON.parse(document.getElementById("memlens-serve").textContent);
  const PAIR = DATA.pair;

  function recordError(err) {
    const msg = err && err.stack ? String(err.stack).split("\n").slice(0, 4).join(" | ") : String((err && err.message) || err);
    ML.errors.push(msg);
    try {
      console.error("memlens runs: " + msg);
      let box = document.getElementById("errors");
      if (!box) {
        box = el("div", { id: "errors", class: "errors", role: "alert" }, el("strong", null, "This page hit an error while drawing; some sections may be incomplete."));
        document.body.insertBefore(box, document.body.firstChild);
      }
      box.appendChild(el("div", { class: "mono" }, msg));
    } catch (_) { /* nothing more to do */ }
  }
  window.addEventListener("error", (e) => recordError(e.error || e.message));
  function guard(fn) {
    return function () { try { return fn.apply(this, arguments); } catch (e) { recordError(e); } };
  }
  function el(tag, attrs) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        const v = attrs[k];
        if (v == null || v === false) continue;
        if (k === "class") e.className = v;
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
    if (n == null) return "–";
    const neg = n < 0;
    let v = Math.abs(n);
    if (v < 1024) return (neg ? "-" : "") + v + " B";
    let u = -1;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return (neg ? "-" : "") + v.toFixed(2) + " " + UNITS[u];
  }
  function fmtSigned(n) { return n == null ? "–" : (n > 0 ? "+" : "") + fmtBytes(n); }
  function fmtInt(n) { return n == null ? "–" : Number(n).toLocaleString("en-US"); }
  function fmtMs(us) { return us == null ? "–" : (us / 1e3).toFixed(1) + " ms"; }
  function fmtPct(x) { return x == null ? "–" : (x * 100).toFixed(1) + "%"; }
  function bytesCell(n, cls) { return el("td", { class: "num" + (cls ? " " + cls : ""), title: fmtInt(n) + " bytes", "data-bytes": String(n) }, fmtBytes(n)); }
  function signedCell(n) { return el("td", { class: "num " + (n > 0 ? "up" : n < 0 ? "down" : ""), title: fmtInt(n) + " bytes", "data-bytes": String(n) }, fmtSigned(n)); }
  function rich(t) {
    const parts = String(t).split("`");
    if (parts.length < 3) return String(t);
    return parts.map((x, i) => (i % 2 && i < parts.length - 1 ? el("code", null, x) : (i % 2 ? "`" + x : x)));
  }
  function heading(title, sub) {
    return el("div", { class: "sec-head" }, el("h2", null, title), sub ? el("span", { class: "sub" }, sub) : null);
  }
  function table(head, rows, cls) {
    return el("div", { class: "table-wrap" }, el("table", { class: "grid " + (cls || "") },
      el("thead", null, el("tr", null, head.map(([h, num]) => el("th", { class: num ? "num" : null }, h)))),
      el("tbody", null, rows)));
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

  // ---------------------------------------------------------------- runs and their colours
  const RUNS = DATA.runs;
  const OUTLIER = "#e15759", RESERVED = "#1f2937", MARKER = "#7c3aed";
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac", "#ff9da7"];
  function color(i) {
    if (PAIR) return i === 0 ? PALETTE[0] : PALETTE[1];
    if (i === DATA.outlier) return OUTLIER;
    return PALETTE[i % PALETTE.length];
  }
  function runName(i) {
    if (PAIR) return i === 0 ? "base" : "candidate";
    const r = RUNS[i];
    return r.rank != null && DATA.imbalance && DATA.imbalance.ranks.some((k) => k.rank === r.rank && k.file === r.file) ? "rank " + r.rank : "run " + i;
  }
  function fileOf(i) { return RUNS[i].file; }

  // ---------------------------------------------------------------- state
  const S = { axis: DATA.axes.includes("step") && PAIR ? "step" : "event", layout: "overlaid", mode: "absolute", scale: "shared" };
  const AXIS_WORDS = { event: "event index", time: "time since the first event", step: "step" };
  function coord(p) { return S.axis === "event" ? p.event : S.axis === "time" ? p.time_us : p.step_x; }
  // The place of event e of run i on the current axis (null when it has none).
  function placeOf(i, e) {
    const r = RUNS[i];
    if (e == null || e < 0) return 0;
    if (S.axis === "event") return e;
    if (S.axis === "time") {
      const pts = r.points;
      let best = null;
      for (const p of pts) { if (p.event <= e && p.time_us != null) best = p.time_us; else if (p.event > e) break; }
      return best;
    }
    for (let k = 0; k < r.steps.length; k++) {
      const s = r.steps[k];
      if (e >= s.first_event && e <= s.last_event) return k + (e - s.first_event) / (s.last_event - s.first_event + 1);
    }
    return null;
  }
  function xMax() {
    let m = 1;
    for (const r of RUNS) {
      if (!r.points.length) continue;
      if (S.axis === "event") m = Math.max(m, r.events);
      else if (S.axis === "time") m = Math.max(m, r.duration_us || 1);
      else m = Math.max(m, r.steps.length);
    }
    return m;
  }

  // ---------------------------------------------------------------- sections
  const sections = {};
  function section(id) { const s = el("section", { id: id, class: "card" }); sections[id] = s; return s; }

  function renderHeader() {
    const title = PAIR ? "compare two runs" : RUNS.length + " runs";
    const nav = el("nav", { class: "toc" }, [["runs", "Runs"], ["timeline", "Timeline"], PAIR ? ["moment", "At a moment"] : ["run", "One run"], PAIR ? ["diff", "Differences"] : null, DATA.imbalance && !PAIR ? ["imbalance", "Imbalance"] : null]
      .filter(Boolean).map(([id, t]) => el("a", { href: "#" + id }, t)));
    fill(sections.header, el("div", { class: "title-row" }, el("h1", null, el("span", { class: "brand" }, "memlens"), " " + title)),
      el("div", { class: "meta" }, RUNS.map((r, i) => el("span", null, el("i", { class: "sw", style: "background:" + color(i) }), el("b", null, runName(i) + ": "), el("span", { class: "mono" }, r.file)))),
      (DATA.notes || []).length ? el("ul", { class: "plain muted" }, DATA.notes.map((t) => el("li", null, rich(t)))) : null,
      nav);
  }

  function renderRuns() {
    const rows = RUNS.map((r, i) => el("tr", { class: "row" + (i === DATA.outlier && !PAIR ? " outlier" : "") + (ML.run === i ? " current" : ""), "data-run": String(i), onclick: PAIR ? null : () => showRun(i) },
      el("td", null, el("i", { class: "sw", style: "background:" + color(i) }), runName(i)),
      el("td", { class: "mono" }, r.file),
      el("td", { class: "num" }, fmtInt(r.device)),
      el("td", { class: "num" }, fmtInt(r.events)),
      bytesCell(r.peak_bytes, "peak"), bytesCell(r.max_reserved_bytes),
      el("td", { class: "num" }, fmtInt(r.allocations)),
      el("td", { class: "num" }, fmtMs(r.duration_us)),
      el("td", { class: "num" }, fmtInt(r.steps.length) + (r.step_source ? " (" + r.step_source.replace("_", " ") + ")" : ""))));
    const im = DATA.imbalance;
    fill(sections.runs, heading("Runs", PAIR ? "the first is the base, the second the candidate" : "click a run for its own view"),
      table([["run"], ["file"], ["device", 1], ["events", 1], ["peak (live requested)", 1], ["most reserved", 1], ["allocations", 1], ["duration", 1], ["steps", 1]], rows),
      im && !PAIR ? el("p", { id: "outlier-line" }, el("b", null, runName(DATA.outlier)), " peaks highest: " + fmtBytes(im.max_peak_bytes) + ", " + im.max_over_median.toFixed(2) + "× the median " + fmtBytes(im.median_peak_bytes) + ".") : null);
  }

  // ---------------------------------------------------------------- timeline
  const W = 1000, H_OVER = 260, H_STACK = 110, H_DIFF = 200;
  function controls() {
    const group = (name, values, words) => el("span", { class: "seg", role: "group", "aria-label": name },
      values.map((v) => el("button", { class: "btn small" + (S[name] === v ? " on" : ""), ["data-" + name]: v, "aria-pressed": S[name] === v ? "true" : "false",
        onclick: () => { S[name] = v; renderTimeline(); } }, words[v] || v)));
    return el("div", { class: "controls" },
      el("span", { class: "muted" }, "axis "), group("axis", DATA.axes, { event: "event", time: "time", step: "step" }),
      el("span", { class: "muted" }, " runs "), group("layout", ["overlaid", "stacked"], {}),
      S.layout === "stacked" && S.mode === "absolute" ? [el("span", { class: "muted" }, " scale "), group("scale", ["shared", "own"], { own: "each run's own" })] : null,
      PAIR ? [el("span", { class: "muted" }, " bytes "), group("mode", ["absolute", "difference"], { difference: "difference (cand − base)" })] : null);
  }
  function renderTimeline() {
    if (S.mode === "difference" && !PAIR) S.mode = "absolute";
    if (!DATA.axes.length) {
      fill(sections.timeline, heading("Timeline"), el("p", { class: "muted", id: "no-timeline" }, "No run has a trace (memory history): there is no line to draw. The tables compare each run's final state."));
      ML.plot = null;
      return;
    }
    const canvases = [];
    const X = xMax();
    let top = 1;
    for (const r of RUNS) for (const p of r.points) top = Math.max(top, p.reserved_bytes, p.live_bytes);
    let body;
    if (S.mode === "difference") {
      const c = el("canvas", { class: "runs-canvas", "data-diff": "1" });
      canvases.push({ canvas: c, runs: [], height: H_DIFF });
      body = c;
    } else if (S.layout === "stacked") {
      body = RUNS.map((r, i) => {
        const c = el("canvas", { class: "runs-canvas", "data-run": String(i) });
        canvases.push({ canvas: c, runs: [i], height: H_STACK });
        return el("div", { class: "stack-row" }, el("div", { class: "stack-label" }, el("i", { class: "sw", style: "background:" + color(i) }), runName(i), r.points.length ? null : el("div", { class: "muted small" }, "no trace")), c);
      });
    } else {
      const c = el("canvas", { class: "runs-canvas", "data-run": "all" });
      canvases.push({ canvas: c, runs: RUNS.map((_, i) => i), height: H_OVER });
      body = c;
    }
    const diff = PAIR && (PAIR.difference || []).find((d) => d.axis === S.axis);
    fill(sections.timeline, heading("Timeline", "live requested bytes on one " + AXIS_WORDS[S.axis] + " axis" + (S.mode === "difference" ? ": candidate minus base" : "")),
      controls(), el("div", { class: "plot-wrap" }, body,
        el("div", { class: "x-axis", style: "width:" + W + "px" }, el("span", null, axisText(0)), el("span", { class: "muted" }, AXIS_WORDS[S.axis] + (S.mode === "difference" ? "" : " · full height " + fmtBytes(top))), el("span", null, axisText(X)))),
      el("div", { class: "legend" },
        S.mode === "difference" ? [el("span", null, el("i", { class: "sw", style: "background:" + PALETTE[1] }), "the candidate holds more"), el("span", null, el("i", { class: "sw", style: "background:" + PALETTE[0] }), "the base holds more")]
          : [RUNS.map((r, i) => el("span", null, el("i", { class: "sw", style: "background:" + color(i) }), runName(i))),
            S.layout === "stacked" ? el("span", null, el("i", { class: "sw sw-reserved" }), "reserved") : el("span", { class: "muted" }, "stacked shows reserved bytes too")],
        el("span", { class: "muted" }, PAIR ? "click the plot: both live sets there" : "click a run: its own view")));
    ML.plot = { axis: S.axis, layout: S.layout, mode: S.mode, width: W, x_max: X, scale_bytes: top, canvases: [] };
    for (const c of canvases) {
      if (S.mode === "difference") ML.plot.canvases.push(drawDifference(c.canvas, diff, c.height));
      else ML.plot.canvases.push(drawRuns(c.canvas, c.runs, X, S.layout === "stacked" && S.scale === "own" ? ownTop(c.runs[0]) : top, c.height));
      c.canvas.addEventListener("click", guard((ev) => clickPlot(ev, c, X)));
    }
    ML.momentPoint = function (k) {
      const m = PAIR && PAIR.moments[k];
      const c = canvases[0];
      if (!m || !c || m.kind !== S.axis) return null;
      const b = c.canvas.getBoundingClientRect();
      return { x: b.left + (m.x / X) * W, y: b.top + c.height / 2 };
    };
  }
  function axisText(v) {
    if (S.axis === "event") return "event " + fmtInt(Math.round(v));
    if (S.axis === "time") return v >= 1e6 ? (v / 1e6).toFixed(3) + " s" : (v / 1e3).toFixed(1) + " ms";
    return "step " + Math.round(v);
  }
  // The highest point of run i's line: the full height of its canvas on its own scale.
  function ownTop(i) {
    let t = 1;
    for (const p of RUNS[i].points) t = Math.max(t, p.reserved_bytes, p.live_bytes);
    return t;
  }
  function xPix(v, X) { return Math.round((v / X) * W); }
  function drawRuns(canvas, runs, X, top, H) {
    const ctx = setupCanvas(canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    const y = (v) => H - Math.round((v / top) * (H - 2));
    const unit = S.axis === "event" ? 1 : 0;
    const stacked = runs.length === 1 && S.layout === "stacked";
    const out = { runs: runs, height: H, scale_bytes: top, segments: 0 };
    for (const i of runs) {
      const pts = RUNS[i].points;
      const segs = [];
      for (let k = 0; k < pts.length; k++) {
        const v = coord(pts[k]);
        if (v == null) continue;
        const nx = k + 1 < pts.length ? coord(pts[k + 1]) : null;
        const x0 = xPix(v, X), x1 = Math.max(x0 + 1, nx != null ? xPix(nx, X) : xPix(v + unit, X));
        segs.push([x0, x1, pts[k]]);
      }
      if (stacked) {
        ctx.fillStyle = color(i);
        for (const [x0, x1, p] of segs) if (p.live_bytes > 0) ctx.fillRect(x0, y(p.live_bytes), x1 - x0, H - y(p.live_bytes));
        ctx.strokeStyle = RESERVED;
        ctx.lineWidth = 1;
        ctx.beginPath();
        segs.forEach(([x0, x1, p], k) => { const yy = y(p.reserved_bytes) + 0.5; if (k === 0) ctx.moveTo(x0, yy); else ctx.lineTo(x0, yy); ctx.lineTo(x1, yy); });
        ctx.stroke();
      } else {
        ctx.strokeStyle = color(i);
        ctx.lineWidth = i === DATA.outlier && !PAIR ? 2.5 : 1.5;
        ctx.beginPath();
        segs.forEach(([x0, x1, p], k) => { const yy = y(p.live_bytes) + 0.5; if (k === 0) ctx.moveTo(x0, yy); else ctx.lineTo(x0, yy); ctx.lineTo(x1, yy); });
        ctx.stroke();
      }
      out.segments += segs.length;
    }
    drawMarkers(ctx, runs, X, H);
    return out;
  }
  function drawMarkers(ctx, runs, X, H) {
    const m = PAIR && ML.moment != null ? PAIR.moments[ML.moment] : null;
    if (!m) return;
    ctx.setLineDash([4, 3]);
    for (const i of runs) {
      const side = i === 0 ? m.base : m.cand;
      const v = placeOf(i, side.at.event_index);
      if (v == null) continue;
      ctx.strokeStyle = MARKER;
      ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(xPix(v, X) + 0.5, 0); ctx.lineTo(xPix(v, X) + 0.5, H); ctx.stroke();
    }
    ctx.setLineDash([]);
  }
  function drawDifference(canvas, diff, H) {
    const ctx = setupCanvas(canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    if (!diff || !diff.points.length) { ctx.fillStyle = "#66727f"; ctx.fillText("The runs share no stretch of this axis.", 10, 20); return { height: H, bars: 0 }; }
    const top = Math.max(1, ...diff.points.map((p) => Math.abs(p.delta_bytes)));
    const mid = Math.round(H / 2), half = mid - 1;
    const bw = Math.max(1, Math.round((diff.bucket / diff.x_max) * W));
    let bars = 0;
    for (const p of diff.points) {
      if (!p.delta_bytes) continue;
      const h = Math.max(1, Math.round((Math.abs(p.delta_bytes) / top) * half));
      ctx.fillStyle = p.delta_bytes > 0 ? PALETTE[1] : PALETTE[0];
      const x0 = xPix(p.x, diff.x_max);
      if (p.delta_bytes > 0) ctx.fillRect(x0, mid - h, bw, h); else ctx.fillRect(x0, mid, bw, h);
      bars++;
    }
    ctx.fillStyle = "#9aa5b1";
    ctx.fillRect(0, mid, W, 1);
    ctx.fillStyle = "#3e4c59";
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillText("+" + fmtBytes(top), 4, 12);
    ctx.fillText("-" + fmtBytes(top), 4, H - 4);
    return { height: H, bars: bars, scale_bytes: top };
  }
  function clickPlot(ev, c, X) {
    const b = c.canvas.getBoundingClientRect();
    const v = ((ev.clientX - b.left) / W) * X;
    if (!PAIR) {
      if (c.runs.length === 1) return showRun(c.runs[0]);
      // Overlaid: the run whose line is nearest the click at that place.
      const yBytes = (1 - (ev.clientY - b.top) / c.height) * ML.plot.scale_bytes;
      let best = null, bestD = Infinity;
      c.runs.forEach((i) => {
        let val = null;
        for (const p of RUNS[i].points) { const x = coord(p); if (x != null && x <= v) val = p.live_bytes; }
        if (val != null && Math.abs(val - yBytes) < bestD) { bestD = Math.abs(val - yBytes); best = i; }
      });
      if (best != null) showRun(best);
      return;
    }
    let best = null, bestD = Infinity;
    PAIR.moments.forEach((m, k) => { if (m.kind === S.axis && Math.abs(m.x - v) < bestD) { bestD = Math.abs(m.x - v); best = k; } });
    if (best != null) showMoment(best);
  }

  // ---------------------------------------------------------------- both runs at a moment
  function siteRows(sites) {
    return sites.map((s) => el("tr", { class: "row", "data-site": s.site },
      el("td", null, s.status), bytesCell(s.base_bytes), bytesCell(s.cand_bytes), signedCell(s.delta_bytes),
      el("td", { class: "num" }, fmtInt(s.base_count) + " → " + fmtInt(s.cand_count)),
      el("td", { class: "mono" }, s.site, s.moved_from ? el("span", { class: "muted" }, " (moved from " + s.moved_from + ")") : null)));
  }
  const SITE_HEAD = [["status"], ["base", 1], ["candidate", 1], ["change", 1], ["count", 1], ["site"]];
  function showMoment(k) {
    const m = PAIR.moments[k];
    if (!m) {
      fill(sections.moment, heading("At a moment"), el("p", { class: "muted", id: "no-moments" }, "A run has no trace: there is no moment to compare both live sets at, only the final states below."));
      return;
    }
    ML.moment = k;
    const side = (name, s) => el("tr", null, el("td", null, name), el("td", { class: "num" }, fmtInt(s.at.event_index)), bytesCell(s.live_bytes), bytesCell(s.reserved_bytes));
    const choices = PAIR.moments.map((x, j) => ({ x: x, j: j })).filter((o) => o.x.kind === "peak" || o.x.kind === "step");
    fill(sections.moment, heading("At a moment: " + m.label, m.kind === "peak" ? "each run at its own peak" : m.kind === "step" ? "each run at the peak of " + m.label : m.kind === "event" ? "both runs after the same event" : "both runs at the same time since their first event"),
      el("div", { class: "controls" }, el("span", { class: "muted" }, "go to "), choices.map((o) => el("button", { class: "btn small" + (o.j === k ? " on" : ""), "data-moment": String(o.j), onclick: () => showMoment(o.j) }, o.x.label))),
      table([[""], ["event", 1], ["live", 1], ["reserved", 1]], [side("base", m.base), side("candidate", m.cand)], "compact"),
      el("div", { class: "only", id: "only-totals" },
        el("div", { "data-only": "base" }, el("b", null, "only in the base: "), el("span", { "data-bytes": String(m.only_base_bytes) }, fmtBytes(m.only_base_bytes)), el("span", { class: "muted" }, " at " + fmtInt(m.counts.removed) + " sites")),
        el("div", { "data-only": "cand" }, el("b", null, "only in the candidate: "), el("span", { "data-bytes": String(m.only_cand_bytes) }, fmtBytes(m.only_cand_bytes)), el("span", { class: "muted" }, " at " + fmtInt(m.counts.new) + " sites")),
        el("div", { "data-only": "both" }, el("b", null, "at sites both hold: "), el("span", { "data-bytes": String(m.common_base_bytes) }, fmtBytes(m.common_base_bytes)), " → ", el("span", { "data-bytes": String(m.common_cand_bytes) }, fmtBytes(m.common_cand_bytes)))),
      m.sites.length ? table(SITE_HEAD, siteRows(m.sites)) : el("p", { class: "muted" }, "Both live sets hold the same bytes at every site."),
      m.more_sites ? el("p", { class: "muted" }, "… " + fmtInt(m.more_sites) + " more sites differ") : null);
    if (ML.plot) renderTimeline();
  }

  // ---------------------------------------------------------------- one run (many runs)
  function showRun(i) {
    ML.run = i;
    const r = RUNS[i];
    const link = SERVE ? el("a", { href: "/?" + new URLSearchParams({ token: new URLSearchParams(location.search).get("token") || "", file: String(i) }).toString(), "data-testid": "open-run" }, "open its own page") : null;
    fill(sections.run, heading(runName(i) + ": " + r.file, "at its peak, after event " + fmtInt(r.peak.event_index) + " of device " + r.device),
      el("p", null, "peak " + fmtBytes(r.peak_bytes) + " · most reserved " + fmtBytes(r.max_reserved_bytes) + " · " + fmtInt(r.allocations) + " allocations · " + fmtInt(r.steps.length) + " steps ", link),
      el("h3", null, "Categories at the peak"),
      r.categories.length ? table([["category"], ["bytes", 1], ["allocations", 1]], r.categories.map((c) => el("tr", { "data-category": c.name }, el("td", null, c.name), bytesCell(c.bytes), el("td", { class: "num" }, fmtInt(c.count))))) : el("p", { class: "muted" }, "No categories."),
      el("h3", null, "Top sites at the peak"),
      table([["bytes", 1], ["allocations", 1], ["site"]], r.sites.map((s) => el("tr", { class: "row", "data-site": s.name }, bytesCell(s.bytes), el("td", { class: "num" }, fmtInt(s.count)), el("td", { class: "mono" }, s.name)))),
      r.sites_total > r.sites.length ? el("p", { class: "muted" }, "… " + fmtInt(r.sites_total - r.sites.length) + " more sites") : null);
    renderRuns();
  }
  function renderImbalance() {
    const im = DATA.imbalance;
    if (!im || PAIR) return;
    fill(sections.imbalance, heading("Imbalance", runName(DATA.outlier) + " against the median run"),
      el("p", null, "Median peak " + fmtBytes(im.median_peak_bytes) + "; highest " + fmtBytes(im.max_peak_bytes) + " (" + im.max_over_median.toFixed(2) + "×)."),
      im.sites.length ? table([["site"], ["outlier", 1], ["median", 1], ["excess", 1]], im.sites.map((s) => el("tr", { class: "row", "data-site": s.site }, el("td", { class: "mono" }, s.site), bytesCell(s.outlier_bytes), bytesCell(s.median_bytes), bytesCell(s.excess_bytes)))) : el("p", { class: "muted" }, "No site holds more in the outlier than in the median run."),
      (im.notes || []).map((t) => el("p", { class: "muted" }, t)));
  }

  // ---------------------------------------------------------------- the diff (two runs)
  function renderDiff() {
    const d = PAIR.diff;
    const pairRow = (name, p) => el("tr", null, el("td", null, name), bytesCell(p.base), bytesCell(p.cand), signedCell(p.delta_bytes));
    const c = d.counts;
    const parts = [heading("Differences", "at each run's peak, by " + d.by + (d.ignore_lines ? ", line numbers ignored" : "")),
      table([[""], ["base", 1], ["candidate", 1], ["change", 1]], [pairRow("peak (live requested)", d.peak), pairRow("reserved", d.reserved),
        el("tr", null, el("td", null, "fragmentation"), el("td", { class: "num" }, fmtPct(d.fragmentation.base)), el("td", { class: "num" }, fmtPct(d.fragmentation.cand)), el("td", { class: "num" }, (d.fragmentation.delta * 100).toFixed(1) + " pts"))], "compact")];
    if (d.observations && d.observations.length) parts.push(el("h3", null, "Observations"), el("ul", { id: "observations" }, d.observations.map((o) => el("li", null, rich(o)))));
    if (d.categories && d.categories.length) {
      parts.push(el("h3", null, "By category"), table([["category"], ["base", 1], ["candidate", 1], ["change", 1], ["count", 1]], d.categories.map((k) => el("tr", { "data-category": k.category }, el("td", null, k.category), bytesCell(k.base_bytes), bytesCell(k.cand_bytes), signedCell(k.delta_bytes), el("td", { class: "num" }, fmtInt(k.base_count) + " → " + fmtInt(k.cand_count)))), "diff-categories"));
    }
    parts.push(el("h3", null, "By site: " + c.new + " new, " + c.removed + " removed, " + c.grown + " grown, " + c.shrunk + " shrunk, " + c.unchanged + " unchanged" + (c.moved ? " (" + c.moved + " only moved to another line)" : "")));
    if (!d.sites_compared) parts.push(el("p", { class: "muted" }, "Sites not compared: a run recorded no frames."));
    else parts.push(d.sites.length ? el("div", { class: "diff-sites" }, table(SITE_HEAD, siteRows(d.sites.slice(0, 50)))) : el("p", { class: "muted" }, "No site changed."));
    if (d.settings && d.settings.length) {
      parts.push(el("h3", null, "Allocator settings that differ"), table([["setting"], ["base"], ["candidate"]], d.settings.map((s) => el("tr", { "data-setting": s.key }, el("td", { class: "mono" }, s.key), el("td", { class: "mono" }, s.base == null ? "(unset)" : s.base), el("td", { class: "mono" }, s.cand == null ? "(unset)" : s.cand))), "settings"));
    }
    if (d.steps) {
      const st = d.steps, dv = st.divergence;
      parts.push(el("h3", null, "Steps of device " + st.device + " side by side"),
        table([["step"], ["base peak", 1], ["candidate peak", 1], ["change", 1], ["allocations", 1], ["duration", 1]], st.rows.slice(0, 200).map((row) => {
          const b = row.base, cd = row.cand;
          return el("tr", { class: dv && dv.step === row.step ? "current" : null, "data-step": String(row.step) },
            el("td", null, row.step + " " + ((b || cd || {}).name || ""), dv && dv.step === row.step ? el("b", null, " ◀ parts most") : null),
            b ? bytesCell(b.peak_bytes) : el("td", { class: "num" }, "–"), cd ? bytesCell(cd.peak_bytes) : el("td", { class: "num" }, "–"),
            row.delta_bytes == null ? el("td", { class: "num" }, "–") : signedCell(row.delta_bytes),
            el("td", { class: "num" }, (b ? fmtInt(b.allocations) : "–") + " → " + (cd ? fmtInt(cd.allocations) : "–")),
            el("td", { class: "num" }, fmtMs(b && b.duration_us) + " → " + fmtMs(cd && cd.duration_us)));
        })));
      if (dv) parts.push(el("h3", null, "Where the runs part most: step " + dv.step + " (peak " + fmtSigned(dv.delta_bytes) + ")"), dv.sites.length ? table(SITE_HEAD, siteRows(dv.sites.slice(0, 25))) : null);
    }
    if (d.notes && d.notes.length) parts.push(el("ul", { class: "plain muted" }, d.notes.map((t) => el("li", null, rich(t)))));
    fill(sections.diff, ...parts);
  }

  function main() {
    const ids = ["header", "runs", "timeline"].concat(PAIR ? ["moment", "diff"] : ["run"]).concat(DATA.imbalance && !PAIR ? ["imbalance"] : []);
    fill(document.getElementById("app"), ids.map(section));
    for (const f of [renderHeader, renderRuns, renderTimeline]) { try { f(); } catch (e) { recordError(e); } }
    try {
      if (PAIR) {
        renderDiff();
        const dv = PAIR.diff.steps && PAIR.diff.steps.divergence;
        const at = dv ? PAIR.moments.findIndex((m) => m.kind === "step" && m.label === "step " + dv.step) : -1;
        showMoment(at >= 0 ? at : 0);
      } else {
        renderImbalance();
        showRun(DATA.outlier != null ? DATA.outlier : 0);
      }
    } catch (e) { recordError(e); }
    ML.ready = true;
  }
  try { main(); } catch (e) { recordError(e); ML.ready = true; }
})();
