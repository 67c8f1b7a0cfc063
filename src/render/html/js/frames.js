  // ================================================================ js/frames.js
  // Report page. Frames and stacks: which frames the two toggles show (and the flamegraph view
  // they name), a stack as a list innermost first, and an allocation's notes as tooltip rows.
  function frameShown(f) {
    const k = DATA.frames[f].kind;
    if (k === "noise") return false;
    if (k === "cpp") return S.showCpp;
    if (k === "torch") return S.showTorch;
    return true;
  }
  function flameView() { return S.showCpp ? (S.showTorch ? "all" : "no_torch") : (S.showTorch ? "no_cpp" : "user"); }
  const VIEW_NAMES = { all: "all frames", no_cpp: "without C++ frames", no_torch: "without PyTorch-internal frames", user: "Python frames outside torch only" };
  function stackList(si) {
    const all = (si != null && DATA.stacks[si]) || [];
    const shown = all.filter(frameShown);
    if (!all.length) return el("div", { class: "stack muted" }, "<no frames recorded>");
    const hidden = all.length - shown.length;
    return el("div", { class: "stack" },
      el("div", { class: "stack-head muted" }, "stack, innermost first" + (hidden ? " (" + hidden + " frame" + (hidden > 1 ? "s" : "") + " hidden)" : "")),
      el("ol", null, shown.map((f) => {
        const fr = DATA.frames[f];
        return el("li", { class: "k-" + fr.kind, title: fr.file + (fr.line >= 0 ? ":" + fr.line : "") }, fr.label);
      })));
  }
  // An allocation's annotations and metadata (page notes), as tooltip rows.
  function noteRows(n) {
    if (!n) return [];
    return (n.annotations || []).map((t) => ["annotated", el("span", { class: "note-text", "data-testid": "annotation" }, t)])
      .concat(n.user_metadata ? [["user metadata", el("span", { class: "mono", "data-testid": "user-metadata" }, n.user_metadata)]] : [])
      .concat(n.internal_metadata ? [["internal metadata", el("span", { class: "mono", "data-testid": "internal-metadata" }, n.internal_metadata)]] : []);
  }
