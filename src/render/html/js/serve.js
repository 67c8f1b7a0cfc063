  // ================================================================ js/serve.js
  // Report page, served (memlens serve). The client of its server: a window or a moment asked
  // for, and the frames and stacks of each answer merged into the page's own.
  // A route of the server behind a served page, answered as JSON.
  function api(route, params) {
    const q = new URLSearchParams(params);
    q.set("file", String(SERVE.file));
    q.set("token", TOKEN || "");
    return fetch("/api/" + route + "?" + q.toString(), { headers: { "X-Memlens-Token": TOKEN || "" }, cache: "no-store" })
      .then((r) => r.json().then((j) => { if (!r.ok) throw new Error(route + ": " + (j.error || r.status)); return j; }));
  }
  // Frames and stacks of a server answer, added to the page's own; returns the stack map.
  function adoptStacks(frames, stacks) {
    if (!S.frameKey) {
      S.frameKey = new Map(DATA.frames.map((f, i) => [JSON.stringify(f), i]));
      S.stackKey = new Map(DATA.stacks.map((s, i) => [s.join(","), i]));
    }
    const fmap = frames.map((f) => {
      const k = JSON.stringify(f);
      let i = S.frameKey.get(k);
      if (i == null) { i = DATA.frames.length; DATA.frames.push(f); S.frameKey.set(k, i); }
      return i;
    });
    const smap = stacks.map((st) => {
      const g = st.map((f) => fmap[f]);
      const k = g.join(",");
      let i = S.stackKey.get(k);
      if (i == null) { i = DATA.stacks.length; DATA.stacks.push(g); S.stackKey.set(k, i); }
      return i;
    });
    return (i) => (i == null || i < 0 ? i : smap[i]);
  }
  // A served window's moment: its peak, in the state, top and flame sections.
  function followWindow(T, w) {
    const dp = T.dp;
    const k = dp.moments.findIndex((m) => m.name === "window peak");
    if (!w) {
      if (k >= 0) { dp.moments.splice(k, 1); if (S.moment >= dp.moments.length || S.moment === k) S.moment = 0; renderMoment(); }
      return;
    }
    const seq = T.seq;
    // Asked once the zoom has settled (a quarter second without another), so that a run of
    // zooms does not queue a moment per window on the server.
    clearTimeout(S.momentTimer);
    S.momentTimer = setTimeout(() => { if (seq === T.seq && S.tl === T) fetchWindowMoment(T, w, seq); }, 250);
  }
  function fetchWindowMoment(T, w, seq) {
    const dp = T.dp;
    api("moment", { device: dp.device, at: w.peak.event_index, name: "window peak" }).then((mp) => {
      if (seq !== T.seq || S.tl !== T) return;
      const remap = adoptStacks(mp.frames, mp.stacks);
      const m = mp.moment;
      for (const sg of m.state.segments) for (const bl of sg.blocks) if (bl[4] >= 0) bl[4] = remap(bl[4]);
      m.top.row_stacks = m.top.row_stacks.map(remap);
      remapFlameFrames(m.flame, mp.frames);
      const j = dp.moments.findIndex((x) => x.name === "window peak");
      if (j >= 0) dp.moments[j] = m; else dp.moments.push(m);
      S.moment = dp.moments.findIndex((x) => x.name === "window peak");
      renderMoment();
    }).catch(recordError);
  }
  function remapFlameFrames(flame, frames) {
    const idx = frames.map((f) => S.frameKey.get(JSON.stringify(f)));
    for (const view of ["all", "no_cpp", "no_torch", "user"]) {
      const t = flame[view];
      if (t) t.frame = t.frame.map((f) => (f < 0 ? f : idx[f]));
    }
  }
