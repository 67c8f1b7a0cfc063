  // ================================================================ js/tooltip.js
  // Report page (any page with hovers could join it). The hover box: one #tooltip element, placed
  // beside the pointer and kept inside the window, and the key-value rows it usually holds.
  const tooltip = el("div", { id: "tooltip", role: "tooltip", hidden: true });
  function showTip(content, cx, cy) {
    fill(tooltip, content);
    tooltip.hidden = false;
    const r = tooltip.getBoundingClientRect();
    let x = cx + 16, y = cy + 16;
    if (x + r.width > window.innerWidth - 8) x = Math.max(8, cx - r.width - 16);
    if (y + r.height > window.innerHeight - 8) y = Math.max(8, window.innerHeight - r.height - 8);
    tooltip.style.left = x + "px";
    tooltip.style.top = y + "px";
  }
  function hideTip() { tooltip.hidden = true; }
  function kv(rows) {
    return el("dl", { class: "kv" }, rows.filter(Boolean).map(([k, v]) => [el("dt", null, k), el("dd", null, v)]));
  }
