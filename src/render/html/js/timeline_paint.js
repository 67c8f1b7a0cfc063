  // ================================================================ js/timeline_paint.js
  // Report page. Painting the timeline: the live bytes column by column (bands, strata, the other
  // allocations) and the marks over them (the pinned band, reserved line, OOMs, moment, peak).
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
