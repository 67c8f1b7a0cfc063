  // ================================================================ js/axis.js
  // Both pages. Canvases and their axes, drawn one way on both pages (the report's timeline, the
  // runs page's plots): a canvas sized in CSS pixels at the device's resolution; tick steps
  // (binary for bytes, decimal for counts); the byte axis (grid lines across the plot, labels in
  // IEC units: 512 MiB, 1.5 GiB); the count axis under a plot (tick marks, labels, the axis's
  // name); text cut to a width; and the binary search the hit-tests use.
  const AXIS_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
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
  // A round step at least `raw`: 1, 2 or 5 times a power of ten, or (`binary`, from 1 KiB up)
  // 1, 2, 5, 10, 20, 25, 50, 100, 200, 250 or 500 times a power of 1024.
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
  // The ticks of a byte axis from 0 to `max` bytes, at most `count` steps of a binary step.
  function byteTicks(max, count) {
    const step = niceStep(max / count, true);
    const out = [];
    for (let v = 0; v <= max; v += step) out.push(v);
    return out;
  }
  // A grid line across [left, right] at each tick, at y = Y(bytes).
  function byteGrid(ctx, ticks, Y, left, right) {
    ctx.strokeStyle = "#e6e9ed"; ctx.lineWidth = 1;
    for (const v of ticks) {
      const y = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(right, y); ctx.stroke();
    }
  }
  // Each tick's label, right-aligned at x, beside its grid line: fmtAxis(bytes), or `text`'s.
  function byteLabels(ctx, ticks, Y, x, text) {
    ctx.font = AXIS_FONT;
    ctx.fillStyle = "#616e7c"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const v of ticks) ctx.fillText((text || fmtAxis)(v), x, Math.round(Y(v)) + 0.5);
  }
  // The ticks of a count axis (events, steps, microseconds) over [x0, x1] drawn `width`
  // pixels wide: about one per `spacing` pixels, whole multiples of a decimal step of at least 1.
  function countTicks(x0, x1, width, spacing) {
    const step = Math.max(1, niceStep((x1 - x0) / Math.max(2, Math.floor(width / spacing)), false));
    const out = [];
    for (let v = Math.ceil(x0 / step) * step; v <= x1; v += step) out.push(v);
    return out;
  }
  // The count axis under a plot whose bottom edge is at y: a tick mark and its label (`text`)
  // at x = X(v) for each tick, and the axis's name right-aligned at `right` below them.
  function countAxis(ctx, ticks, X, y, text, name, right) {
    ctx.font = AXIS_FONT; ctx.lineWidth = 1;
    ctx.fillStyle = "#616e7c"; ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (const v of ticks) {
      const x = Math.round(X(v)) + 0.5;
      ctx.strokeStyle = "#c9ced6";
      ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y + 4); ctx.stroke();
      ctx.fillText(text(v === 0 ? 0 : v), x, y + 7);
    }
    ctx.textAlign = "right";
    ctx.fillStyle = "#8a96a3";
    ctx.fillText(name, right, y + 18);
  }
  // `text` cut with an ellipsis to fit `w` pixels ("" when not even one character fits).
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
