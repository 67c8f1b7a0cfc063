  // ================================================================ js/runs_moment.js
  // Runs page, two runs. Both at a moment: each side's event, live and reserved bytes, what only
  // one side holds and what both hold, and the sites that differ.
  function siteRows(sites) {
    return sites.map((s) => el("tr", { class: "row", "data-site": s.site },
      el("td", null, s.status), bytesCell(s.base_bytes), bytesCell(s.cand_bytes), signedCell(s.delta_bytes),
      el("td", { class: "num" }, fmtInt(s.base_count) + " → " + fmtInt(s.cand_count)),
      el("td", { class: "mono" }, s.site, s.moved_from ? el("span", { class: "muted" }, " (moved from " + s.moved_from + ")") : null)));
  }
  // The Differences' table that holds moment m's sites ([its id, its name]), or null.
  function sitesInDiff(m) {
    const d = PAIR.diff, dv = d.steps && d.steps.divergence;
    if (!m.sites.length) return null;
    if (m.kind === "peak" && d.sites_compared && d.sites.length) return ["diff-sites", "Differences, by site"];
    if (m.kind === "step" && dv && m.label === "step " + dv.step && dv.sites.length) return ["diff-divergence", "where the runs part most"];
    return null;
  }
  const SITE_HEAD = [["status"], ["base", 1], ["candidate", 1], ["change", 1], ["count", 1], ["site"]];
  function showMoment(k) {
    const m = PAIR.moments[k];
    if (!m) {
      fill(sections.moment, heading("At a moment"), el("p", { class: "muted", id: "no-moments" }, "A run has no trace: there is no moment to compare both live sets at, only the final states below."));
      return;
    }
    ML.moment = k;
    const side = (name, s) => el("tr", null, el("td", null, name), el("td", { class: "num" }, fmtInt(s.at.event_index)), bytesCell(s.live_bytes), bytesCell(s.reserved_bytes));
    const choices = PAIR.moments.map((x, j) => ({ x: x, j: j })).filter((o) => o.x.kind === "peak" || o.x.kind === "step");
    fill(sections.moment, heading("At a moment: " + m.label, m.kind === "peak" ? "each run at its own peak" : m.kind === "step" ? "each run at the peak of " + m.label : m.kind === "event" ? "both runs after the same event" : "both runs at the same time since their first event"),
      el("div", { class: "controls" }, el("span", { class: "muted" }, "go to "), choices.map((o) => el("button", { class: "btn small" + (o.j === k ? " on" : ""), "data-moment": String(o.j), onclick: () => showMoment(o.j) }, o.x.label))),
      table([[""], ["event", 1], ["live", 1], ["reserved", 1]], [side("base", m.base), side("candidate", m.cand)], "compact"),
      el("div", { class: "only", id: "only-totals" },
        el("div", { "data-only": "base" }, el("b", null, "only in the base: "), el("span", { "data-bytes": String(m.only_base_bytes) }, fmtBytes(m.only_base_bytes)), el("span", { class: "muted" }, " at " + fmtInt(m.counts.removed) + " sites")),
        el("div", { "data-only": "cand" }, el("b", null, "only in the candidate: "), el("span", { "data-bytes": String(m.only_cand_bytes) }, fmtBytes(m.only_cand_bytes)), el("span", { class: "muted" }, " at " + fmtInt(m.counts.new) + " sites")),
        el("div", { "data-only": "both" }, el("b", null, "at sites both hold: "), el("span", { "data-bytes": String(m.common_base_bytes) }, fmtBytes(m.common_base_bytes)), " → ", el("span", { "data-bytes": String(m.common_cand_bytes) }, fmtBytes(m.common_cand_bytes)))),
      // A table the Differences already show (at the peaks; at the step where the runs part
      // most) is shown once, there: here a link to it.
      sitesInDiff(m)
        ? el("p", { class: "muted", id: "moment-sites-in-diff" }, "The sites that differ " + (m.kind === "peak" ? "at the peaks" : "at " + m.label) + ": ", el("a", { href: "#" + sitesInDiff(m)[0] }, sitesInDiff(m)[1]), " below.")
        : [m.sites.length ? table(SITE_HEAD, siteRows(m.sites)) : el("p", { class: "muted" }, "Both live sets hold the same bytes at every site."),
          m.more_sites ? el("p", { class: "muted" }, "… " + fmtInt(m.more_sites) + " more sites differ") : null]);
    if (ML.plot) renderTimeline();
  }
