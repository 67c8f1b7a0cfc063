  // ================================================================ js/advice.js
  // Report page. The advice section, and the one ranked list of what to change at a moment
  // (memlens fit's, the same ids and order as memlens oom's recommendations; the OOM cards show
  // it too), with the immaterial fixes apart and the plan.
  const COST_WORDS = { free: "free", speed: "slower", results: "changes results", slower: "slower", changes_results: "changes results" };
  function fixBlock(f, testid) {
    const preds = {};
    ((DATA.oom && DATA.oom.ooms) || []).forEach((o) => { if (o.device === f.device && o.event_index === f.at.event_index) o.recommendations.forEach((r) => { if (r.predicted) preds[r.id] = r.predicted; }); });
    const plan = f.plan;
    return el("div", { "data-testid": testid },
      el("h3", null, "What to change, cheapest first"),
      f.fixes.length ? el("ol", { class: "recs" }, f.fixes.map((x) => el("li", { "data-testid": "fix", "data-id": x.id },
        el("span", { class: "cost c-" + x.cost }, COST_WORDS[x.cost] || x.cost), " ", el("span", { class: "action" }, rich(x.action)),
        el("div", { class: "why" }, (x.for_verdict ? "answers the verdict" : "saves " + fmtBytes(x.saves_bytes) + " → " + fmtBytes(x.peak_after_bytes)) + " · " + x.confidence + " confidence · ", rich(x.evidence)),
        preds[x.id] ? el("div", { class: "why predicted" }, "Predicted, " + preds[x.id].words + ".") : null)))
        : el("p", { "data-testid": "no-fix" }, "No fix that matters applies at this moment."),
      f.immaterial_fixes && f.immaterial_fixes.length ? el("p", { class: "muted", "data-testid": "immaterial" }, "Immaterial (each saves under 1% of the " + fmtBytes(f.demand_bytes) + " to hold): " + f.immaterial_fixes.map((x) => x.id + " (" + fmtBytes(x.saves_bytes) + ")").join(", ")) : null,
      plan ? el("p", { class: "muted" }, plan.fits_now ? "It fits " + fmtBytes(plan.capacity_bytes) + " as it is." : plan.fits
        ? "Plan for " + fmtBytes(plan.capacity_bytes) + " (" + plan.capacity_source + "): " + plan.steps.map((p) => p.id).join(" + ") + " → " + fmtBytes(plan.steps[plan.steps.length - 1].peak_after_bytes) + "."
        : "With every fix it is still " + fmtBytes(plan.short_by_bytes) + " short of " + fmtBytes(plan.target_bytes) + ".")
        : judgementLine(f.capacity, "capacity-judgement", "Capacity: "));
  }
  // What to change on the device shown: at its OOM (the OOM card holds the list), else at its peak.
  function renderAdvice() {
    const s = sections.advice;
    if (!s) return;
    const f = (DATA.advice || []).find((d) => d.device === devId());
    if (!f) { fill(s, heading("What to change", devName(devId())), el("p", { class: "muted" }, "No live memory on this device.")); return; }
    const at = (f.moment === "oom" ? "at its OOM" : "at its " + f.moment) + " (" + (f.at.event_index >= 0 ? "event " + fmtInt(f.at.event_index) + ", " : "") + f.moment_phase.words + "): " + fmtBytes(f.demand_bytes) + " to hold";
    const oomShown = f.moment === "oom" && DATA.oom && sections.oom;
    fill(s, heading("What to change", devName(f.device) + " " + at),
      oomShown ? el("p", { "data-testid": "advice-see-oom" }, "This device ran out of memory: ", el("a", { href: "#oom" }, "the OOM card above"), " lists what to change there, cheapest first.")
        : fixBlock(f, "advice"),
      f.notes.length ? el("ul", { class: "plain muted" }, f.notes.map((t) => el("li", null, rich(t)))) : null);
  }
