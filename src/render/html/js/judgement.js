  // ================================================================ js/judgement.js
  // Report page. An analysis's judgement (leaks, a kind of growth, categories, capacity) as one
  // line, for the advice, leaks and categories sections.
  // "Cannot judge: why. Record what." or the reason itself, after `label`.
  function judgementLine(j, testid, label) {
    if (!j) return null;
    const attrs = (cls) => ({ class: cls, "data-state": j.state, "data-testid": testid });
    if (j.state === "cannot_judge") {
      return el("p", attrs("judgement cannot-judge"), label ? el("b", null, label) : null,
        el("b", null, "Cannot judge: "), rich(j.why), j.record ? el("span", null, ". Record ", rich(j.record), ".") : ".");
    }
    return el("p", attrs("judgement"), label ? el("b", null, label) : null, rich(j.why + "."));
  }
