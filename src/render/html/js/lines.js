  // ================================================================ js/lines.js
  // Report page. Memory by source line at the moment shown (`memlens lines --at MOMENT`, the
  // live cost): the hottest lines, then, where the page embeds them (--source-root, or the
  // recorded paths read as they are), the hot files' source with each line's bytes before it.
  function renderLines() {
    const s = sections.lines;
    const m = moment();
    const l = m && m.lines;
    if (!l) { fill(s, heading("Memory by source line")); return; }
    const sub = momentLabel(m) + (m.at.event_index >= 0 ? " · after event " + fmtInt(m.at.event_index) : "") + " · " +
      fmtBytes(l.framed_bytes) + " of " + fmtBytes(l.counted_bytes) + " live on " + fmtInt(l.line_count) + " line" + (l.line_count === 1 ? "" : "s");
    const rows = l.lines.map((r) => el("tr", { "data-testid": "line-row", "data-file": r.file, "data-line": String(r.line) },
      el("td", { class: "mono site", title: r.file + ":" + r.line }, path(r.file + ":" + r.line)),
      el("td", { class: "mono" }, r.function),
      bytesCell(r.self_bytes), bytesCell(r.total_bytes),
      el("td", { class: "num" }, fmtInt(r.allocations))));
    const unattributed = l.unattributed.map((u) => el("li", { "data-testid": "lines-unattributed", "data-bytes": String(u.bytes) }, fmtBytes(u.bytes) + " " + u.why));
    const more = l.line_count - l.lines.length;
    fill(s,
      heading("Memory by source line", sub),
      l.judgement.state === "found" ? null : judgementLine(l.judgement, "lines-judgement"),
      l.lines.length ? table([["file:line"], ["function"], ["self", 1], ["total", 1], ["allocations", 1]], rows, "compact lines-table") : null,
      more > 0 ? el("p", { class: "muted small" }, "… and " + fmtInt(more) + " more lines (", el("code", null, "memlens lines --at " + (m.at.event_index >= 0 ? m.at.event_index : "…")), " lists them all)") : null,
      unattributed.length ? el("div", null, el("h3", null, fmtBytes(l.unattributed_bytes) + " on no line"), el("ul", { class: "plain muted" }, unattributed)) : null,
      l.sources && l.sources.length ? l.sources.map(renderSourceFile)
        : el("p", { class: "muted small", "data-testid": "lines-source-hint" }, "memlens report FILE ", el("code", null, "--source-root DIR"), " adds the annotated source of the hottest files."),
      (l.notes || []).length ? el("ul", { class: "plain muted small" }, l.notes.map((t) => el("li", null, rich(t)))) : null);
  }
  // One hot file: its lines with their self bytes (and total where it differs) before them,
  // the hot lines marked, a gap between excerpts.
  function renderSourceFile(f) {
    const rows = [];
    let prev = null;
    for (const x of f.lines) {
      if (prev !== null && x.line > prev + 1) rows.push(el("tr", { class: "gap" }, el("td", { colspan: 4 }, "⋮")));
      prev = x.line;
      const hot = x.self_bytes > 0 || x.total_bytes > 0;
      rows.push(el("tr", { class: hot ? "hot" : null, "data-testid": "source-line", "data-line": String(x.line), "data-self": String(x.self_bytes), "data-total": String(x.total_bytes) },
        el("td", { class: "num", title: hot ? fmtInt(x.self_bytes) + " bytes self" : null }, x.self_bytes ? fmtBytes(x.self_bytes) : ""),
        el("td", { class: "num", title: hot ? fmtInt(x.total_bytes) + " bytes total" : null }, x.total_bytes !== x.self_bytes ? fmtBytes(x.total_bytes) : ""),
        el("td", { class: "num lineno" }, String(x.line)),
        el("td", { class: "src" }, x.text)));
    }
    return el("div", { class: "source-file", "data-testid": "source-file", "data-file": f.file },
      el("h3", { class: "mono" }, path(f.file), el("span", { class: "muted small" }, " " + fmtBytes(f.self_bytes) + " self" + (f.path ? "; read from " + f.path : ""))),
      f.note ? el("p", { class: "muted small", "data-testid": "source-note" }, f.note) : null,
      rows.length ? el("div", { class: "table-wrap" }, el("table", { class: "source" },
        el("thead", null, el("tr", null, el("th", { class: "num" }, "self"), el("th", { class: "num" }, "total"), el("th"), el("th"))),
        el("tbody", null, rows))) : null);
  }
