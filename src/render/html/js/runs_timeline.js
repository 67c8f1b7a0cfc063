  // ================================================================ js/runs_timeline.js
  // Runs page. The timeline: every run's live bytes on the axis chosen, overlaid, stacked (on one
  // scale or each on its own) or, for two runs, their difference; a click picks a moment (two
  // runs) or a run.
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
