  // ================================================================ js/leaks.js
  // Report page. The leaks section: the findings (growth per step, fix), or the judgement of why
  // there is none.
  // The leaks analysis's judgement of a device without a finding: judged and nothing grows, or
  // "cannot judge" with why and what to record (never "no leak found" when it could not judge).
  function leaksJudgement(j) {
    if (j && j.state === "none") return el("p", { class: "judgement", "data-testid": "leaks-judgement", "data-state": j.state }, "No leak or retained graph: " + j.why + ".");
    return judgementLine(j, "leaks-judgement", "");
  }
  // Each kind of growth (leak, retained graph) on its own when growth was found (judged
  // without growth, or not judged, both kinds are what the judgement says), as the CLI does.
  function leaksKinds(src) {
    if (!src || !src.leak || !src.retained_graph || src.judgement.state !== "found") return null;
    const word = (j) => j.state === "found" ? "found" : j.state === "none" ? "none" : "cannot judge: " + j.why + (j.record ? "; record " + j.record : "");
    return el("p", { class: "judgement kinds", "data-testid": "leaks-kinds", "data-leak": src.leak.state, "data-retained-graph": src.retained_graph.state },
      rich("Leak: " + word(src.leak) + ". Retained graph: " + word(src.retained_graph) + "."));
  }
  function renderLeaks() {
    const s = sections.leaks;
    const d = devId();
    const found = DATA.leaks.findings.filter((f) => f.device === d);
    const dl = (DATA.leaks.devices || []).find((x) => x.device === d);
    const notes = dl ? dl.notes : [];
    const steps = dl && dl.steps ? dl.steps : [];
    fill(s, heading("Leaks and retained graphs", devName(d) + (dl && dl.source ? " · steps from " + dl.source + (dl.marker ? " (" + dl.marker + ")" : "") + ", " + steps.length + " found" : "")),
      found.length ? table([["kind"], ["site"], ["growth per step", 1], ["steps", 1], ["live at end", 1], ["fit R²", 1]],
        found.map((f) => [
          el("tr", null, el("td", null, el("span", { class: "badge k-" + f.kind }, f.kind.replace(/_/g, " "))), el("td", { class: "mono site" }, path(shownSite(f.site))), bytesCell(f.bytes_per_step), el("td", { class: "num" }, fmtInt(f.steps)), bytesCell(f.live_bytes_at_end), el("td", { class: "num" }, f.fit_r2 != null ? f.fit_r2.toFixed(3) : "–")),
          el("tr", { class: "fix-row" }, el("td"), el("td", { colspan: 5 }, el("span", { class: "fix-label" }, "Fix: "), rich(f.fix)))])) :
        leaksJudgement(dl ? dl.judgement : DATA.leaks.judgement),
      leaksKinds(dl || DATA.leaks),
      notes.length ? el("ul", { class: "plain muted" }, notes.map((t) => el("li", null, rich(t)))) : null,
      !dl ? el("p", { class: "muted" }, "No leak search: this device has no trace.") : null);
  }
