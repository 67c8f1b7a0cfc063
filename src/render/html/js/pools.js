  // ================================================================ js/pools.js
  // Report page. The private pools section: per (pool, stream) its figures, and its reserved
  // (line) and active (area) bytes over the trace.
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
      table(["pool", "segments", "reserved at end", "peak reserved", "active at end", "peak active", "ghost blocks", "over the trace (scale " + fmtBytes(top) + ")"].map((h, i) => [h, i > 0 && i < 7]),
        rows.map((r) => r.tr), "pools-table"),
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
