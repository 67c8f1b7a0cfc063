  // ================================================================ js/runs_main.js
  // Runs page. Its assembly: the sections in order and the call that draws the page. It closes
  // the function js/prelude.js opened.
  function main() {
    const ids = ["header", "runs", "timeline"].concat(PAIR ? ["moment", "diff"] : ["run"]).concat(DATA.imbalance && !PAIR ? ["imbalance"] : []);
    fill(document.getElementById("app"), ids.map(section));
    for (const f of [renderHeader, renderRuns, renderTimeline]) { try { f(); } catch (e) { recordError(e); } }
    try {
      if (PAIR) {
        renderDiff();
        const dv = PAIR.diff.steps && PAIR.diff.steps.divergence;
        const at = dv ? PAIR.moments.findIndex((m) => m.kind === "step" && m.label === "step " + dv.step) : -1;
        showMoment(at >= 0 ? at : 0);
      } else {
        renderImbalance();
        showRun(DATA.outlier != null ? DATA.outlier : 0);
      }
    } catch (e) { recordError(e); }
    let t = null;
    window.addEventListener("resize", guard(() => { clearTimeout(t); t = setTimeout(guard(renderTimeline), 120); }));
    ML.ready = true;
  }
  try { main(); } catch (e) { recordError(e); ML.ready = true; }
})();
