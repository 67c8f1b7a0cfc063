  // ================================================================ js/runs_diff.js
  // Runs page, two runs. memlens diff's report: totals, observations, categories, sites,
  // settings, the steps side by side and where the runs part most.
  function renderDiff() {
    const d = PAIR.diff;
    const pairRow = (name, p) => el("tr", null, el("td", null, name), bytesCell(p.base), bytesCell(p.cand), signedCell(p.delta_bytes));
    const c = d.counts;
    const parts = [heading("Differences", "at each run's peak, by " + d.by + (d.ignore_lines ? ", line numbers ignored" : "")),
      table([[""], ["base", 1], ["candidate", 1], ["change", 1]], [pairRow("peak (live requested)", d.peak), pairRow("reserved", d.reserved),
        el("tr", null, el("td", null, "fragmentation"), el("td", { class: "num" }, fmtPct(d.fragmentation.base)), el("td", { class: "num" }, fmtPct(d.fragmentation.cand)), el("td", { class: "num" }, (d.fragmentation.delta * 100).toFixed(1) + " pts"))], "compact")];
    if (d.observations && d.observations.length) parts.push(el("h3", null, "Observations"), el("ul", { id: "observations" }, d.observations.map((o) => el("li", null, rich(o)))));
    if (d.categories && d.categories.length) {
      parts.push(el("h3", null, "By category"), table([["category"], ["base", 1], ["candidate", 1], ["change", 1], ["count", 1]], d.categories.map((k) => el("tr", { "data-category": k.category }, el("td", null, k.category), bytesCell(k.base_bytes), bytesCell(k.cand_bytes), signedCell(k.delta_bytes), el("td", { class: "num" }, fmtInt(k.base_count) + " → " + fmtInt(k.cand_count)))), "diff-categories"));
    }
    parts.push(el("h3", null, "By site: " + c.new + " new, " + c.removed + " removed, " + c.grown + " grown, " + c.shrunk + " shrunk, " + c.unchanged + " unchanged" + (c.moved ? " (" + c.moved + " only moved to another line)" : "")));
    if (!d.sites_compared) parts.push(el("p", { class: "muted" }, "Sites not compared: a run recorded no frames."));
    else parts.push(d.sites.length ? el("div", { class: "diff-sites", id: "diff-sites" }, table(SITE_HEAD, siteRows(d.sites.slice(0, 50)))) : el("p", { class: "muted" }, "No site changed."));
    if (d.settings && d.settings.length) {
      parts.push(el("h3", null, "Allocator settings that differ"), table([["setting"], ["base"], ["candidate"]], d.settings.map((s) => el("tr", { "data-setting": s.key }, el("td", { class: "mono" }, s.key), el("td", { class: "mono" }, s.base == null ? "(unset)" : s.base), el("td", { class: "mono" }, s.cand == null ? "(unset)" : s.cand))), "settings"));
    }
    if (d.steps) {
      const st = d.steps, dv = st.divergence;
      parts.push(el("h3", null, "Steps of device " + st.device + " side by side"),
        table([["step"], ["base peak", 1], ["candidate peak", 1], ["change", 1], ["allocations", 1], ["duration", 1]], st.rows.slice(0, 200).map((row) => {
          const b = row.base, cd = row.cand;
          return el("tr", { class: dv && dv.step === row.step ? "current" : null, "data-step": String(row.step) },
            el("td", null, row.step + " " + ((b || cd || {}).name || ""), dv && dv.step === row.step ? el("b", null, " ◀ parts most") : null),
            b ? bytesCell(b.peak_bytes) : el("td", { class: "num" }, "–"), cd ? bytesCell(cd.peak_bytes) : el("td", { class: "num" }, "–"),
            row.delta_bytes == null ? el("td", { class: "num" }, "–") : signedCell(row.delta_bytes),
            el("td", { class: "num" }, (b ? fmtInt(b.allocations) : "–") + " → " + (cd ? fmtInt(cd.allocations) : "–")),
            el("td", { class: "num" }, fmtMs(b && b.duration_us) + " → " + fmtMs(cd && cd.duration_us)));
        })));
      if (dv) parts.push(el("h3", { id: "diff-divergence" }, "Where the runs part most: step " + dv.step + " (peak " + fmtSigned(dv.delta_bytes) + ")"), dv.sites.length ? table(SITE_HEAD, siteRows(dv.sites.slice(0, 25))) : null);
    }
    if (d.notes && d.notes.length) parts.push(el("ul", { class: "plain muted" }, d.notes.map((t) => el("li", null, rich(t)))));
    fill(sections.diff, ...parts);
  }
