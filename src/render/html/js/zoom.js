  // ================================================================ js/zoom.js
  // Report page. Zooming the timeline to a window of events, and back.
  // The static page shows its samples larger; a served page asks its server for the
  // window at the detail of its columns (every event once the window holds fewer events than
  // columns). Either way the URL's #window=FIRST-LAST names what is shown.
  function resetZoom() {
    const T = S.tl;
    if (!T) return Promise.resolve(false);
    return zoomTo(T.lo, T.hi - 1);
  }
  function zoomTo(first, last) {
    const T = S.tl;
    if (!T) return Promise.resolve(false);
    first = Math.max(T.lo, Math.min(Math.floor(first), T.hi - 1));
    last = Math.max(first, Math.min(Math.floor(last), T.hi - 1));
    T.x0 = first; T.x1 = last + 1;
    const whole = first === T.lo && last === T.hi - 1;
    setHash(whole ? null : first + "-" + last);
    const seq = ++T.seq;
    if (!SERVE || whole) {
      if (T.src !== T.full) { const pinned = pinnedBand(); useSource(T, T.full); repin(pinned); }
      drawTimeline();
      if (SERVE && whole) followWindow(T, null);
      return Promise.resolve(true);
    }
    drawTimeline(); // the samples at hand, larger, while the window is fetched
    const g = T.geo, dpr = window.devicePixelRatio || 1;
    const columns = Math.max(1, Math.round((g.right - g.left) * dpr));
    T.detailEl.textContent = "fetching events " + fmtInt(first) + "…" + fmtInt(last) + "…";
    return api("window", { device: T.dp.device, first: first, last: last, columns: columns }).then((w) => {
      if (seq !== T.seq || S.tl !== T) return false;
      const remap = adoptStacks(w.frames, w.stacks);
      for (const b of w.bands) b.stack = remap(b.stack);
      if (w.every_event) w.every_event.stack = w.every_event.stack.map(remap);
      const pinned = pinnedBand();
      useSource(T, tlSource(w));
      repin(pinned);
      drawTimeline();
      followWindow(T, w);
      return true;
    });
  }
  function repin(b) { // the pinned allocation again, in a new set of bands
    if (!b) return;
    const i = S.tl.bands.findIndex((B) => B.b.address === b.address && B.b.alloc_event === b.alloc_event);
    S.pinned = i >= 0 ? i : null;
    ML.pinned = S.pinned;
  }
  function setHash(w) {
    try {
      const url = location.pathname + location.search + (w ? "#window=" + w : "");
      history.replaceState(null, "", url);
    } catch (_) { /* file:// pages may refuse; the view is still right */ }
  }
  function hashWindow() {
    const m = /^#window=(-?\d+)-(-?\d+)$/.exec(location.hash || "");
    return m ? [Number(m[1]), Number(m[2])] : null;
  }
