  // ================================================================ js/categories.js
  // Report page. The categories section: live bytes by category, with the rules that placed them.
  function renderCategories() {
    const s = sections.categories;
    const d = devId();
    const c = (DATA.categories.devices || []).find((x) => x.device === d);
    if (!c) { fill(s, heading("Categories"), el("p", { class: "muted" }, "No categories for this device.")); return; }
    fill(s, heading("Categories", "at the " + DATA.categories.moment + (c.at && c.at.event_index >= 0 ? " (after event " + fmtInt(c.at.event_index) + ")" : "") + " · " + fmtBytes(c.live_requested_bytes) + " live"),
      table([["category"], ["bytes", 1], ["share", 1], ["allocations", 1], ["confidence"], ["rules"]],
        c.categories.map((k) => el("tr", null,
          el("td", null, el("b", null, k.category)), bytesCell(k.bytes),
          shareCell(k.share),
          el("td", { class: "num" }, fmtInt(k.count)),
          el("td", null, el("span", { class: "conf conf-" + k.confidence }, k.confidence)),
          el("td", { class: "rules" }, el("ul", { class: "plain" }, (k.rules || []).map((r) => el("li", null, r.rule, el("span", { class: "muted" }, " · " + fmtBytes(r.bytes) + " · " + r.confidence)))))))),
      c.judgement && c.judgement.state !== "found" ? judgementLine(c.judgement, "categories-judgement", "") : null,
      c.notes && c.notes.length ? el("ul", { class: "plain muted" }, c.notes.map((t) => el("li", null, rich(t)))) : null);
  }
