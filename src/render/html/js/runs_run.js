  // ================================================================ js/runs_run.js
  // Runs page, many runs. One run's view (its categories and top sites at its peak) and the
  // imbalance section (the outlier against the median run).
  function showRun(i) {
    ML.run = i;
    const r = RUNS[i];
    const link = SERVE ? el("a", { href: "/?" + new URLSearchParams({ token: new URLSearchParams(location.search).get("token") || "", file: String(i) }).toString(), "data-testid": "open-run" }, "open its own page") : null;
    fill(sections.run, heading(runName(i) + ": " + r.file, "at its peak, after event " + fmtInt(r.peak.event_index) + " of device " + r.device),
      el("p", null, "peak " + fmtBytes(r.peak_bytes) + " · most reserved " + fmtBytes(r.max_reserved_bytes) + " · " + fmtInt(r.allocations) + " allocations · " + fmtInt(r.steps.length) + " steps ", link),
      el("h3", null, "Categories at the peak"),
      r.categories.length ? table([["category"], ["bytes", 1], ["allocations", 1]], r.categories.map((c) => el("tr", { "data-category": c.name }, el("td", null, c.name), bytesCell(c.bytes), el("td", { class: "num" }, fmtInt(c.count))))) : el("p", { class: "muted" }, "No categories."),
      el("h3", null, "Top sites at the peak"),
      table([["bytes", 1], ["allocations", 1], ["site"]], r.sites.map((s) => el("tr", { class: "row", "data-site": s.name }, bytesCell(s.bytes), el("td", { class: "num" }, fmtInt(s.count)), el("td", { class: "mono" }, s.name)))),
      r.sites_total > r.sites.length ? el("p", { class: "muted" }, "… " + fmtInt(r.sites_total - r.sites.length) + " more sites") : null);
    renderRuns();
  }
  function renderImbalance() {
    const im = DATA.imbalance;
    if (!im || PAIR) return;
    fill(sections.imbalance, heading("Imbalance", runName(DATA.outlier) + " against the median run"),
      el("p", null, "Median peak " + fmtBytes(im.median_peak_bytes) + "; highest " + fmtBytes(im.max_peak_bytes) + " (" + im.max_over_median.toFixed(2) + "×)."),
      im.sites.length ? table([["site"], ["outlier", 1], ["median", 1], ["excess", 1]], im.sites.map((s) => el("tr", { class: "row", "data-site": s.site }, el("td", { class: "mono" }, s.site), bytesCell(s.outlier_bytes), bytesCell(s.median_bytes), bytesCell(s.excess_bytes)))) : el("p", { class: "muted" }, "No site holds more in the outlier than in the median run."),
      (im.notes || []).map((t) => el("p", { class: "muted" }, t)));
  }
