  // ================================================================ js/flame.js
  // Report page. The flamegraph section: the tree at the moment shown in the frame view chosen,
  // drawn on a canvas (callees under a pixel merged), searched, zoomed and hovered.
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
  const FLAME_HUE = { user: [30, 72, 66], library: [172, 32, 60], torch: [352, 40, 75], cpp: [215, 24, 74] };
  function frameColor(f) {
    if (f < 0) return "#d5d9de";
    const fr = DATA.frames[f];
    const base = FLAME_HUE[fr.kind] || [0, 0, 75];
    const j = (hash(fr.name) % 13) - 6;
    return "hsl(" + (base[0] + j) + "," + base[1] + "%," + (base[2] + j * 0.8) + "%)";
  }
