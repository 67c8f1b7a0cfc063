  // ================================================================ js/top.js
  // Report page. The top sites section: live bytes by site, sorted and filtered, each row opening
  // its stack; and live bytes by user metadata.
  let TOP = null;
  function renderTop() {
    const s = sections.top;
    const m = moment();
    if (!m) { fill(s, heading("Top sites")); TOP = null; return; }
    const t = m.top;
    TOP = { m: m, sort: TOP ? TOP.sort : { key: "bytes", dir: -1 }, filter: TOP ? TOP.filter : "", open: new Set(), tbody: el("tbody") };
    const filter = el("input", { type: "search", id: "top-filter", placeholder: "filter sites and frames…", value: TOP.filter,
      oninput: (e) => { TOP.filter = e.target.value; fillTop(); } });
    const cpp = el("input", { type: "checkbox", id: "show-cpp", checked: S.showCpp, onchange: (e) => { S.showCpp = e.target.checked; toggled(); } });
    const torch = el("input", { type: "checkbox", id: "show-torch", checked: S.showTorch, onchange: (e) => { S.showTorch = e.target.checked; toggled(); } });
    const th = (key, label, cls) => el("th", { class: (cls || "") + " sortable", "data-key": key, onclick: () => {
      TOP.sort = TOP.sort.key === key ? { key: key, dir: -TOP.sort.dir } : { key: key, dir: key === "site" ? 1 : -1 };
      fillTop();
    } }, label, el("span", { class: "arrow" }));
    TOP.head = el("tr", null, el("th", { class: "exp" }), th("site", "site"), th("bytes", "bytes", "num"), th("share", "share", "num"), th("count", "allocations", "num"));
    fill(s, 
      heading("Top sites", momentLabel(m) + (m.at.event_index >= 0 ? " · after event " + fmtInt(m.at.event_index) : "") + " · " + fmtBytes(t.total) + " in " + fmtInt(t.groups) + " sites"),
      el("div", { class: "toolbar" }, filter,
        el("label", { class: "check" }, cpp, " C++ frames"),
        el("label", { class: "check" }, torch, " PyTorch-internal frames"),
        el("span", { class: "muted", id: "view-name" }, "stacks and flamegraph: " + VIEW_NAMES[flameView()])),
      el("div", { class: "table-wrap top-scroll" }, el("table", { class: "grid top-table" }, el("thead", null, TOP.head), TOP.tbody)),
      m.by_metadata ? el("div", { id: "by-metadata" }, el("h3", null, "Live bytes by user metadata"),
        el("p", { class: "muted small" }, "Grouped by the user_metadata of each allocation's alloc entry (torch.cuda.memory._set_memory_metadata); memlens top --by metadata[:KEY] groups by one key of it."),
        table([["user metadata"], ["bytes", 1], ["share", 1], ["allocations", 1]],
          [m.by_metadata.sites.map((r) => el("tr", { "data-metadata": r.site }, el("td", { class: "mono" }, r.site), bytesCell(r.bytes), shareCell(r.share), el("td", { class: "num" }, fmtInt(r.count)))),
            m.by_metadata.other ? el("tr", { class: "other-row" }, el("td", null, m.by_metadata.other.site), bytesCell(m.by_metadata.other.bytes), shareCell(m.by_metadata.other.share), el("td", { class: "num" }, fmtInt(m.by_metadata.other.count))) : null], "compact md-table")) : null,
      t.notes && t.notes.length ? el("ul", { class: "plain muted" }, t.notes.map((x) => el("li", null, x))) : null);
    fillTop();
  }
  function toggled() {
    const v = document.getElementById("view-name");
    if (v) v.textContent = "stacks and flamegraph: " + VIEW_NAMES[flameView()];
    fillTop();
    renderPinned();
    renderFlame();
  }
  function fillTop() {
    if (!TOP) return;
    const t = TOP.m.top;
    const q = TOP.filter.trim().toLowerCase();
    let rows = t.sites.map((r, i) => ({ r: r, i: i }));
    if (q) rows = rows.filter(({ r, i }) => r.site.toLowerCase().includes(q) ||
      (DATA.stacks[t.row_stacks[i]] || []).some((f) => frameShown(f) && DATA.frames[f].label.toLowerCase().includes(q)));
    const { key, dir } = TOP.sort;
    rows.sort((a, b) => {
      const x = a.r[key], y = b.r[key];
      return (typeof x === "string" ? x.localeCompare(y) : x - y) * dir || a.i - b.i;
    });
    for (const thEl of TOP.head.querySelectorAll("th.sortable")) {
      thEl.querySelector(".arrow").textContent = thEl.dataset.key === key ? (dir > 0 ? " ▲" : " ▼") : "";
      thEl.setAttribute("aria-sort", thEl.dataset.key === key ? (dir > 0 ? "ascending" : "descending") : "none");
    }
    const out = [];
    for (const { r, i } of rows) {
      const open = TOP.open.has(i);
      const tr = el("tr", { class: "row", "data-site": r.site, onclick: () => { if (TOP.open.has(i)) TOP.open.delete(i); else TOP.open.add(i); fillTop(); } },
        el("td", { class: "exp" }, open ? "▾" : "▸"),
        el("td", { class: "mono site", title: r.evidence ? r.site + "\n" + r.evidence : r.site }, path(shownSite(r.site)),
          r.context ? el("div", { class: "row-note", "data-testid": "site-context" }, "via ", path(shownSite(r.context))) : null,
          (r.annotations || []).slice(0, 3).map((a) => el("div", { class: "row-note", "data-testid": "row-annotation" }, "annotated \u201c" + a.text + "\u201d on " + fmtInt(a.count) + " (" + fmtBytes(a.bytes) + ")"))),
        bytesCell(r.bytes),
        shareCell(r.share),
        el("td", { class: "num" }, fmtInt(r.count)));
      out.push(tr);
      // memory alive before the trace with no stack: what the category rules say instead of a stack
      if (open) out.push(el("tr", { class: "stack-row" }, el("td"), el("td", { colspan: 4 }, r.predates_trace
        ? el("div", { class: "stack muted" }, (r.likely_kind ? "Likely " + r.likely_kind.replace(/_/g, " ") + ": " : "") + r.evidence + ".")
        : stackList(t.row_stacks[i]))));
    }
    if (!rows.length) out.push(el("tr", null, el("td"), el("td", { colspan: 4, class: "muted" }, q ? "No site matches the filter." : "Nothing is live at this moment.")));
    if (t.other) out.push(el("tr", { class: "other-row" }, el("td"), el("td", { class: "site" }, t.other.site), bytesCell(t.other.bytes), el("td", { class: "num" }, fmtPct(t.other.share)), el("td", { class: "num" }, fmtInt(t.other.count))));
    fill(TOP.tbody, ...out);
    markTopRows();
  }
  function markTopRows() {
    if (!TOP) return;
    const pb = pinnedBand();
    for (const tr of TOP.tbody.querySelectorAll("tr.row")) tr.classList.toggle("pinned", !!pb && tr.dataset.site === pb.site);
    // Bring the pinned row into the table's own scroll area (never the page's).
    const row = TOP.tbody.querySelector("tr.pinned");
    const wrap = row && row.closest(".top-scroll");
    if (wrap) {
      const top = row.getBoundingClientRect().top - wrap.getBoundingClientRect().top + wrap.scrollTop;
      if (top < wrap.scrollTop || top + row.offsetHeight > wrap.scrollTop + wrap.clientHeight) wrap.scrollTop = top - wrap.clientHeight / 3;
    }
  }
