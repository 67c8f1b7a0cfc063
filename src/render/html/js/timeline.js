  // ================================================================ js/timeline.js
  // Report page. The timeline: its model (samples, bands, phases and steps in lanes), its
  // section, and its back canvas (phases, grid and axes, drawn by js/axis.js).
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
  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  const PALETTE = ["#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d", "#59a14f", "#8cd17d", "#b6992d", "#f1ce63", "#499894",
    "#86bcb6", "#e15759", "#ff9d9a", "#d37295", "#fabfd2", "#b07aa1", "#d4a6c8", "#9d7660", "#d7b5a6"];
  function siteColor(site) { return PALETTE[hash(site) % PALETTE.length]; }
  function renderTimeline() {
    const s = sections.timeline;
    const dp = devPage();
    S.tl = null;
    ML.drawn.timeline_bands = 0;
    ML.view = { first: null, last: null };
    ML.plot = null;
    if (!dp || !dp.timeline || !dp.timeline.samples.event_index.length) {
      const msgs = dp ? absentFor(dp.device).filter((a) => a.code === "no_trace" || a.code === "single_entry_trace") : [];
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
    const kx = pw / (x1 - x0), ky = ph / ymax;
    const X = (e) => g.left + (e - x0) * kx;
    const Y = (b) => g.bottom - b * ky;
    T.X = X; T.Y = Y; T.kx = kx; T.ky = ky; T.ymax = ymax;
    ctx.clearRect(0, 0, g.W, g.H);
    ctx.font = AXIS_FONT;
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
    // grid and axes (js/axis.js, as the runs page draws its own)
    const yticks = byteTicks(ymax, 5);
    byteGrid(ctx, yticks, Y, g.left, g.right);
    byteLabels(ctx, yticks, Y, g.left - 8);
    countAxis(ctx, countTicks(x0, x1, pw, 110), X, g.bottom, fmtInt, "event index", g.right);
    ctx.strokeStyle = "#9aa5b1"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(g.left, g.bottom + 0.5); ctx.lineTo(g.right, g.bottom + 0.5); ctx.stroke();
    paintPlot(T);
    drawMarks(T);
    drawOverlay();
    const shown = (T.src.events ? "every event" : fmtInt(n) + " samples") + (T.src === T.full ? "" : " of events " + fmtInt(T.tl.window.first) + "…" + fmtInt(T.tl.window.last));
    T.detailEl.textContent = shown;
    ML.plot = { left: g.left, top: g.top, width: pw, height: ph, y_max_bytes: ymax, first_event: x0, last_event: x1 - 1 };
  }
