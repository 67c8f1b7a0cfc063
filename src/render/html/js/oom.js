  // ================================================================ js/oom.js
  // Report page. The OOM section: one card per OOM (verdict, the four figures, the live sites
  // (open), what to change, evidence, notes).
  function renderOom() {
    const s = sections.oom;
    const rep = DATA.oom;
    if (!rep || !s) return;
    fill(s, heading("Out of memory", rep.ooms.length + " OOM event" + (rep.ooms.length === 1 ? "" : "s") + " in the snapshot"));
    rep.ooms.forEach((o, k) => {
      const dIdx = DATA.devices.findIndex((d) => d.device === o.device);
      const dp = DATA.devices[dIdx];
      const mIdx = dp ? dp.moments.findIndex((m) => m.name.startsWith("oom:") && m.at.event_index === o.event_index) : -1;
      const stat = (label, v, hint) => el("div", { class: "stat" }, el("div", { class: "stat-label" }, label), el("div", { class: "stat-value", title: v != null ? fmtInt(v) + " bytes" : "" }, fmtBytes(v)), hint ? el("div", { class: "stat-hint" }, hint) : null);
      const card = el("div", { class: "oom-card" },
        el("div", { class: "oom-title" },
          el("span", null, "OOM " + (k + 1) + " · " + devName(o.device) + (o.event_index != null ? " · event " + fmtInt(o.event_index) : "") + (o.backend ? " · " + o.backend : "")),
          mIdx >= 0 ? el("button", { class: "link", onclick: () => { if (dIdx !== S.dev) { selectDevice(dIdx); syncDeviceSelect(); } S.moment = mIdx; renderMoment(); sections.state.scrollIntoView({ behavior: "smooth" }); } }, "show the allocator state at this OOM") : null),
        el("div", { class: "verdict", "data-testid": "oom-verdict" },
          el("span", { class: "badge v-" + o.verdict }, o.verdict), " ", el("span", { class: "headline" }, o.headline)),
        el("div", { class: "stats" },
          stat("Tried to allocate", o.requested_bytes, o.request_rounded_bytes != null && o.request_rounded_bytes !== o.requested_bytes ? "request " + fmtBytes(o.request_rounded_bytes) : null),
          stat("Device free", o.device_free_bytes, o.shortfall_bytes ? fmtBytes(o.shortfall_bytes) + " short" : null),
          stat("Allocated by PyTorch", o.allocated_bytes),
          stat("Reserved but unallocated", o.reserved_unallocated_bytes, o.largest_free_block_bytes != null ? "largest free block " + fmtBytes(o.largest_free_block_bytes) : null)),
        // Where the memory went: open, right under the four numbers.
        o.live_sites && o.live_sites.length ? el("details", { open: true, "data-testid": "oom-live-sites" }, el("summary", null, "Live at the OOM, by site (" + o.live_sites.length + ")"),
          el("table", { class: "grid compact" }, el("tbody", null, o.live_sites.map((r) => el("tr", null, el("td", { class: "mono site" }, path(shownSite(r.site))), bytesCell(r.bytes), el("td", { class: "num" }, fmtPct(r.share))))))) : null,
        ((f) => f ? fixBlock(f, "oom-fit") : o.recommendations.length ? el("div", { "data-testid": "oom-fit" }, el("h3", null, "What to change, cheapest first"),
          el("ol", { class: "recs" }, o.recommendations.map((r) => el("li", { "data-testid": "fix", "data-id": r.id },
            el("span", { class: "cost c-" + r.cost }, COST_WORDS[r.cost] || r.cost), " ", el("span", { class: "action" }, rich(r.action)), el("div", { class: "why" }, rich(r.why)),
            r.predicted ? el("div", { class: "why predicted" }, "Predicted, " + r.predicted.words + ".") : null)))) : null)(
          (rep.fit || []).find((d) => d.device === o.device && d.at.event_index === o.event_index)),
        o.evidence.length ? el("div", null, el("h3", null, "Evidence"), el("ul", { class: "plain" }, o.evidence.map((t) => el("li", null, rich(t))))) : null,
        o.notes.length ? el("div", null, el("h3", null, "Notes"), el("ul", { class: "plain" }, o.notes.map((t) => el("li", null, rich(t))))) : null,
        o.cannot_conclude && o.cannot_conclude.length ? el("div", null, el("h3", null, "Cannot conclude"), el("ul", { class: "plain" }, o.cannot_conclude.map((t) => el("li", null, rich(t))))) : null,
        o.implied_limit ? el("p", { class: "muted" }, "Implied per-process limit: at least " + fmtBytes(o.implied_limit.at_least_bytes) + ", below " + fmtBytes(o.implied_limit.below_bytes) + ".") : null);

      s.appendChild(card);
    });
    if (rep.notes && rep.notes.length) s.appendChild(el("ul", { class: "plain muted" }, rep.notes.map((t) => el("li", null, rich(t)))));
  }
