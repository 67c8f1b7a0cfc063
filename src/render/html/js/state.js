  // ================================================================ js/state.js
  // Report page. The allocator state section: the moment selector, one canvas row per segment
  // with its blocks, and the tooltip of a segment or a block.
  function renderMomentSelect() {
    const dp = devPage();
    return el("label", { class: "momsel" }, "Moment ",
      el("select", { id: "moment-select", onchange: (e) => { S.moment = Math.max(0, dp.moments.findIndex((m) => m.name === e.target.value)); renderMoment(); } },
        dp.moments.map((m, i) => el("option", { value: m.name, selected: i === S.moment },
          momentLabel(m) + (m.at.event_index >= 0 ? " · after event " + fmtInt(m.at.event_index) : "") + " · " + fmtBytes(m.live_bytes) + " live, " + fmtBytes(m.reserved_bytes) + " reserved"))),
      el("span", { class: "muted" }, " drives the allocator state, the top table, the source lines and the flamegraph"));
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
