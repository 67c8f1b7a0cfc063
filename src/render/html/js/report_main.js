  // ================================================================ js/report_main.js
  // Report page. Its assembly: the sections in order, what a device or a moment redraws, the
  // window's listeners, and the call that draws the page. It closes the function js/prelude.js
  // opened.
  function renderMoment() {
    const dp = devPage();
    const m = dp && dp.moments[S.moment];
    ML.moment = m ? m.name : null;
    ML.momentShown = m ? { name: m.name, event_index: m.at.event_index, live_bytes: m.live_bytes } : null;
    renderState();
    renderTop();
    try { renderLines(); } catch (e) { recordError(e); }
    renderFlame();
    if (S.tl) drawTimeline();
  }
  function renderDevice() {
    hideTip();
    renderAdvice();
    renderTimeline();
    renderMoment();
    renderLeaks();
    try { renderPools(); } catch (e) { recordError(e); }
    renderCategories();
    renderSummary();
  }

  function main() {
    const app = document.getElementById("app");
    const ids = ["header", "oom", "advice", "notes", "timeline", "state", "top", "lines", "flame", "leaks", "pools", "categories", "summary"]
      .filter((id) => (id !== "oom" || DATA.oom) && (id !== "pools" || (DATA.pools || []).length) && (id !== "notes" || hasNotes()));
    fill(app, ...ids.map((id) => section(id)));
    document.body.appendChild(tooltip);
    ML.device = devId();
    const steps = [renderHeader, renderOom, renderNotes, renderDevice];
    for (const f of steps) { try { f(); } catch (e) { recordError(e); } }
    window.addEventListener("mouseup", guard(tlUp));
    let t = null;
    window.addEventListener("resize", guard(() => {
      clearTimeout(t);
      t = setTimeout(guard(() => { drawTimeline(); drawState(); drawFlame(); }), 120);
    }));
    window.addEventListener("wheel", hideTip, { passive: true });
    window.addEventListener("keydown", guard((e) => { if (e.key === "Escape") { hideTip(); if (S.pinned != null) pin(null); } }));
    const hw = hashWindow();
    const done = () => { ML.readyMs = Math.round(performance.now() - started); ML.ready = true; };
    if (hw && S.tl) zoomTo(hw[0], hw[1]).catch(recordError).then(done);
    else done();
  }
  try { main(); } catch (e) { recordError(e); ML.ready = true; }
})();
