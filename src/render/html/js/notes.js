  // ================================================================ js/notes.js
  // Report page. The data-quality section, below the answer (the OOM and what to change): the
  // summary's warnings about the file, and what the page cannot show and why.
  function hasNotes() {
    return (DATA.summary.warnings || []).length + DATA.absent.length > 0;
  }
  function renderNotes() {
    const s = sections.notes;
    if (!s) return;
    const warnings = (DATA.summary.warnings || []).map((w) => el("li", { class: "warn" }, el("span", { class: "tag" }, w.device != null ? devName(w.device) : "file"), " ", el("span", { "data-testid": "warning" }, w.message)));
    const absent = DATA.absent.map((a) => el("li", { class: "absent" }, el("span", { class: "tag" }, a.device != null ? devName(a.device) : "file"), " ", el("span", { "data-testid": "absent" }, a.message)));
    fill(s, heading("Data quality", "what the file lacks or holds oddly, and what the page cannot show"),
      warnings.length ? el("div", { class: "notes-block" }, el("h3", null, "Warnings"), el("ul", { class: "flags" }, warnings)) : null,
      absent.length ? el("div", { class: "notes-block" }, el("h3", null, "Not shown"), el("ul", { class: "flags" }, absent)) : null);
  }
