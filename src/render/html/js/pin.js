  // ================================================================ js/pin.js
  // Report page. Pinning an allocation: the timeline band clicked, shown in the pinned panel and
  // highlighted in the allocator state, the top table and the flamegraph.
  function pin(i) {
    S.pinned = i;
    ML.pinned = i;
    drawTimeline();
    renderPinned();
    drawState(true);
    markTopRows();
    drawFlame();
  }
  function pinnedBand() { return S.pinned != null && S.tl ? S.tl.bands[S.pinned].b : null; }
  function renderPinned() {
    const T = S.tl;
    if (!T || !T.pinnedEl) return;
    if (S.pinned == null) {
      fill(T.pinnedEl, el("div", { class: "pinned-empty" }, el("h3", null, "Pinned allocation"),
        el("p", { class: "muted" }, "Click a band to pin it: its details stay here, and the same allocation is highlighted in the allocator state, the top table and the flamegraph.")));
      return;
    }
    fill(T.pinnedEl, el("div", { class: "pinned-head" }, el("h3", null, "Pinned allocation"), el("button", { class: "btn small", onclick: () => pin(null) }, "Unpin")),
      bandDetails(S.pinned, true));
  }
