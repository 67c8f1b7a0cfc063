  // ================================================================ js/timeline_hover.js
  // Report page. The timeline under the pointer: hit-testing by the same column walk that painted
  // it, the tooltip of a band, a stratum, an event or a sample, the overlay; drag to zoom, click
  // to pin.
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
