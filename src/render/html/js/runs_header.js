  // ================================================================ js/runs_header.js
  // Runs page. The header and the runs table: one row per run (a click opens its own view when
  // there are many) and the outlier line.
  function renderHeader() {
    const title = PAIR ? "compare two runs" : RUNS.length + " runs";
    const nav = el("nav", { class: "toc" }, [["runs", "Runs"], ["timeline", "Timeline"], PAIR ? ["moment", "At a moment"] : ["run", "One run"], PAIR ? ["diff", "Differences"] : null, DATA.imbalance && !PAIR ? ["imbalance", "Imbalance"] : null]
      .filter(Boolean).map(([id, t]) => el("a", { href: "#" + id }, t)));
    fill(sections.header, el("div", { class: "title-row" }, el("h1", null, el("span", { class: "brand" }, "memlens"), " " + title)),
      el("div", { class: "meta" }, RUNS.map((r, i) => el("span", null, el("i", { class: "sw", style: "background:" + color(i) }), el("b", null, runName(i) + ": "), el("span", { class: "mono" }, r.file)))),
      (DATA.notes || []).length ? el("ul", { class: "plain muted" }, DATA.notes.map((t) => el("li", null, rich(t)))) : null,
      nav);
  }

  function renderRuns() {
    const rows = RUNS.map((r, i) => el("tr", { class: "row" + (i === DATA.outlier && !PAIR ? " outlier" : "") + (ML.run === i ? " current" : ""), "data-run": String(i), onclick: PAIR ? null : () => showRun(i) },
      el("td", null, el("i", { class: "sw", style: "background:" + color(i) }), runName(i)),
      el("td", { class: "mono" }, r.file),
      el("td", { class: "num" }, fmtInt(r.device)),
      el("td", { class: "num" }, fmtInt(r.events)),
      bytesCell(r.peak_bytes, "peak"), bytesCell(r.max_reserved_bytes),
      el("td", { class: "num" }, fmtInt(r.allocations)),
      el("td", { class: "num" }, fmtMs(r.duration_us)),
      el("td", { class: "num" }, fmtInt(r.steps.length) + (r.step_source ? " (" + r.step_source.replace("_", " ") + ")" : ""))));
    const im = DATA.imbalance;
    fill(sections.runs, heading("Runs", PAIR ? "the first is the base, the second the candidate" : "click a run for its own view"),
      table([["run"], ["file"], ["device", 1], ["events", 1], ["peak (live requested)", 1], ["most reserved", 1], ["allocations", 1], ["duration", 1], ["steps", 1]], rows),
      el("p", { class: "muted small", "data-testid": "live-requested-words" }, "peak (live requested): the most bytes the program's allocations asked for and held at once, as PyTorch records each request (the timeline's height); most reserved: the most the caching allocator held from CUDA, those allocations rounded up plus its cache."),
      im && !PAIR ? el("p", { id: "outlier-line" }, el("b", null, runName(DATA.outlier)), " peaks highest: " + fmtBytes(im.max_peak_bytes) + ", " + im.max_over_median.toFixed(2) + "× the median " + fmtBytes(im.median_peak_bytes) + ".") : null);
  }
