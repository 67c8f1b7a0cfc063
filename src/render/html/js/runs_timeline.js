  // ================================================================ js/runs_timeline.js
  // Runs page. The timeline: every run's live bytes on the axis chosen, overlaid, stacked (on one
  // scale or each on its own) or, for two runs, their difference; its byte and count axes drawn
  // by js/axis.js as the report page's timeline draws its own; a click picks a moment (two runs)
  // or a run.
  // W: the plots' width, the section's own (renderTimeline; at least 600 pixels).
  let W = 1000;
  const H_OVER = 260, H_STACK = 110, H_DIFF = 200;
  // The byte axis left of each plot (its own canvas, so the plot's pixels are the runs'
  // alone) and the count axis under the plots: the labels' width and the axis's height.
  const GUTTER = 64, AXIS_H = 32;
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
    // The plots fill the section: its width less the byte axis, a run's label when stacked,
    // and the card's padding.
    W = Math.max(600, Math.floor(sections.timeline.clientWidth - GUTTER - 48 - (S.layout === "stacked" ? 110 : 0)));
    const X = xMax();
    let top = 1;
    for (const r of RUNS) for (const p of r.points) top = Math.max(top, p.reserved_bytes, p.live_bytes);
    // Each plot beside its byte axis; stacked, each run's row under its name.
    const plot = (attrs, runs, height) => {
      const c = { canvas: el("canvas", Object.assign({ class: "runs-canvas" }, attrs)), axis: el("canvas", { class: "runs-axis" }), runs: runs, height: height };
      canvases.push(c);
      return el("div", { class: "plot-row" }, c.axis, c.canvas);
    };
    let body;
    if (S.mode === "difference") body = plot({ "data-diff": "1" }, [], H_DIFF);
    else if (S.layout === "stacked") {
      body = RUNS.map((r, i) => el("div", { class: "stack-row" },
        el("div", { class: "stack-label" }, el("i", { class: "sw", style: "background:" + color(i) }), runName(i), r.points.length ? null : el("div", { class: "muted small" }, "no trace")),
        plot({ "data-run": String(i) }, [i], H_STACK)));
    } else body = plot({ "data-run": "all" }, RUNS.map((_, i) => i), H_OVER);
    const diff = PAIR && (PAIR.difference || []).find((d) => d.axis === S.axis);
    const xAxis = el("canvas", { class: "runs-axis" });
    fill(sections.timeline, heading("Timeline", "live requested bytes on one " + AXIS_WORDS[S.axis] + " axis" + (S.mode === "difference" ? ": candidate minus base" : "")),
      controls(), el("div", { class: "plot-wrap" }, body,
        S.layout === "stacked" && S.mode !== "difference" ? el("div", { class: "stack-row" }, el("div", { class: "stack-label" }), xAxis) : xAxis),
      el("div", { class: "legend" },
        S.mode === "difference" ? [el("span", null, el("i", { class: "sw", style: "background:" + PALETTE[1] }), "the candidate holds more"), el("span", null, el("i", { class: "sw", style: "background:" + PALETTE[0] }), "the base holds more")]
          : [RUNS.map((r, i) => el("span", null, el("i", { class: "sw", style: "background:" + color(i) }), runName(i))),
            S.layout === "stacked" ? el("span", null, el("i", { class: "sw sw-reserved" }), "reserved") : el("span", { class: "muted" }, "stacked shows reserved bytes too")],
        PAIR && ML.moment != null && PAIR.moments[ML.moment] && S.mode !== "difference"
          ? el("span", { "data-testid": "moment-lines" }, el("i", { class: "sw sw-dashed" }), "dashed: each run at the moment shown below (" + PAIR.moments[ML.moment].label + "), named above its line")
          : null,
        el("span", { class: "muted" }, PAIR ? "click the plot: both live sets there" : "click a run: its own view")));
    ML.plot = { axis: S.axis, layout: S.layout, mode: S.mode, width: W, x_max: X, scale_bytes: top, canvases: [] };
    for (const c of canvases) {
      if (S.mode === "difference") ML.plot.canvases.push(drawDifference(c.canvas, c.axis, diff, c.height));
      else ML.plot.canvases.push(drawRuns(c.canvas, c.axis, c.runs, X, S.layout === "stacked" && S.scale === "own" ? ownTop(c.runs[0]) : top, c.height));
      c.canvas.addEventListener("click", guard((ev) => clickPlot(ev, c, X)));
    }
    drawXAxis(xAxis, S.mode === "difference" && diff ? diff.x_max : X);
    ML.momentPoint = function (k) {
      const m = PAIR && PAIR.moments[k];
      const c = canvases[0];
      if (!m || !c || m.kind !== S.axis) return null;
      const b = c.canvas.getBoundingClientRect();
      return { x: b.left + (m.x / X) * W, y: b.top + c.height / 2 };
    };
  }
  // The count axis under the plots, from 0 to X on the axis chosen (js/axis.js): events and
  // steps counted, times in ms (in s from a second up), named as the axis buttons' words.
  function drawXAxis(canvas, X) {
    const ctx = setupCanvas(canvas, GUTTER + W + 40, AXIS_H);
    const text = S.axis !== "time" ? fmtInt : X >= 1e6 ? (v) => +(v / 1e6).toFixed(3) + " s" : (v) => +(v / 1e3).toFixed(3) + " ms";
    countAxis(ctx, countTicks(0, X, W, 110), (v) => GUTTER + xPix(v, X), 0, text, AXIS_WORDS[S.axis], GUTTER + W);
  }
  // A plot's byte axis (js/axis.js): for each [ticks, Y, text] of `scales`, grid lines on the
  // plot at its ticks, placed by Y, and their labels (written by `text`, else fmtAxis) on the
  // plot's axis canvas, kept inside it at its edges.
  function drawYAxis(ctx, axis, H, scales) {
    const actx = setupCanvas(axis, GUTTER, H);
    actx.clearRect(0, 0, GUTTER, H);
    for (const [ticks, Y, text] of scales) {
      byteGrid(ctx, ticks, Y, 0, W);
      byteLabels(actx, ticks, (v) => Math.min(H - 7, Math.max(6, Y(v))), GUTTER - 6, text);
    }
  }
  // About one byte tick per 50 pixels of a plot's height, at least 2.
  function tickCount(H) { return Math.max(2, Math.floor(H / 50)); }
  // The highest point of run i's line: the full height of its canvas on its own scale.
  function ownTop(i) {
    let t = 1;
    for (const p of RUNS[i].points) t = Math.max(t, p.reserved_bytes, p.live_bytes);
    return t;
  }
  function xPix(v, X) { return Math.round((v / X) * W); }
  function drawRuns(canvas, axis, runs, X, top, H) {
    const ctx = setupCanvas(canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    const y = (v) => H - Math.round((v / top) * (H - 2));
    drawYAxis(ctx, axis, H, [[byteTicks(top, tickCount(H)), y]]);
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
    // Each line named at its top, beside it (right of the line, left near the right edge).
    ctx.font = "11px sans-serif";
    ctx.fillStyle = MARKER;
    ctx.textBaseline = "top";
    for (const i of runs) {
      const side = i === 0 ? m.base : m.cand;
      const v = placeOf(i, side.at.event_index);
      if (v == null) continue;
      const x = xPix(v, X), name = runName(i), w = ctx.measureText(name).width;
      ctx.fillText(name, x + 4 + w > W ? x - 4 - w : x + 4, 2 + (i === 1 && runs.length > 1 ? 13 : 0));
    }
  }
  function drawDifference(canvas, axis, diff, H) {
    const ctx = setupCanvas(canvas, W, H);
    ctx.clearRect(0, 0, W, H);
    if (!diff || !diff.points.length) {
      drawYAxis(ctx, axis, H, []);
      ctx.fillStyle = "#66727f"; ctx.fillText("The runs share no stretch of this axis.", 10, 20);
      return { height: H, bars: 0 };
    }
    const top = Math.max(1, ...diff.points.map((p) => Math.abs(p.delta_bytes)));
    const mid = Math.round(H / 2), half = mid - 1;
    // Bytes up from the middle line where the candidate holds more, down where the base does.
    const ticks = byteTicks(top, tickCount(half));
    drawYAxis(ctx, axis, H, [[ticks, (v) => mid - (v / top) * half, (v) => (v ? "+" : "") + fmtAxis(v)],
      [ticks.slice(1), (v) => mid + (v / top) * half, (v) => "-" + fmtAxis(v)]]);
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
