  // ================================================================ js/frag.js
  // Report page. The fragmentation table beside the allocator state: the device's and each (pool,
  // stream)'s.
  function renderFrag(m) {
    const f = m.frag;
    const cols = [f.total].concat(f.pools);
    const private_ = (p) => p.pool_id[0] || p.pool_id[1];
    const head = (p, i) => i === 0 ? el("th", { class: "num" }, "device", el("div", { class: "muted small" }, "all pools"))
      : el("th", { class: "num", title: p.pool + " pool, stream " + hex(p.stream) + (private_(p) ? ", private pool " + p.pool_id.join(",") : "") },
        p.pool + (private_(p) ? " (private)" : ""), el("div", { class: "muted small" }, "stream " + hex(p.stream)));
    const rows = [["segments", "segments", fmtInt], ["reserved", "reserved_bytes", fmtBytes], ["allocated", "allocated_bytes", fmtBytes],
      ["free (cached)", "free_bytes", fmtBytes], ["pending free", "pending_free_bytes", fmtBytes], ["largest free block", "largest_free_block_bytes", fmtBytes],
      ["fragmentation", "fragmentation", fmtPct], ["stranded free", "stranded_free_bytes", fmtBytes], ["releasable", "releasable_bytes", fmtBytes],
      ["largest request without new memory", "largest_request_without_new_memory_bytes", fmtBytes]]
      .filter(([, k]) => k !== "pending_free_bytes" || cols.some((p) => p[k]));
    return el("div", null,
      el("div", { class: "frag-head" }, el("h3", null, "Fragmentation at this moment")),
      el("div", { class: "table-wrap" }, el("table", { class: "grid frag-table" },
        el("thead", null, el("tr", null, el("th"), cols.map(head))),
        el("tbody", null, rows.map(([label, k, fmt]) => el("tr", null, el("th", { scope: "row" }, label),
          cols.map((p) => el("td", { class: "num", title: typeof p[k] === "number" && fmt === fmtBytes ? fmtInt(p[k]) + " bytes" : null }, fmt(p[k])))))))),
      f.reading ? el("p", { "data-testid": "frag-reading", class: f.reading.matters ? null : "muted" }, f.reading.words) : null,
      renderPinners(f.pinners),
      el("p", { class: "muted small" }, "fragmentation = 1 − largest free block / free (how scattered the cached free bytes are, not whether they matter); stranded: free inside partly used segments; releasable: what empty_cache() could return."));
  }

  // What pins the stranded bytes: the sites whose live blocks keep segments (or pages) from
  // being released, then the reading (the segments they split, the fixes the allocator replay
  // priced). Nothing when no byte is stranded.
  function renderPinners(p) {
    if (!p || !p.stranded_bytes) return null;
    const cols = [["site", null], ["alone", "sole_bytes"], ["shared", "shared_bytes"], ["blocks", "blocks"], ["oldest", null]];
    const oldest = (s) => s.allocated_before_trace ? "before trace" : s.oldest_allocated_event == null ? "–" : "#" + fmtInt(s.oldest_allocated_event);
    return el("div", { class: "pinners", "data-testid": "pinners", "data-bytes": String(p.stranded_bytes) },
      el("h3", null, "What pins the " + fmtBytes(p.stranded_bytes) + " stranded"),
      el("div", { class: "table-wrap" }, el("table", { class: "grid frag-table" },
        el("thead", null, el("tr", null, cols.map(([label, k]) => el("th", { class: k || label === "oldest" ? "num" : null }, label)))),
        el("tbody", null, p.pinners.slice(0, 8).map((s) => el("tr", { "data-testid": "pinner", "data-site": s.site, "data-sole": String(s.sole_bytes), "data-shared": String(s.shared_bytes) },
          el("td", { class: "site" }, s.site),
          el("td", { class: "num", title: fmtInt(s.sole_bytes) + " bytes" }, fmtBytes(s.sole_bytes)),
          el("td", { class: "num", title: fmtInt(s.shared_bytes) + " bytes" }, fmtBytes(s.shared_bytes)),
          el("td", { class: "num", title: fmtBytes(s.block_bytes) }, fmtInt(s.blocks)),
          el("td", { class: "num" }, oldest(s))))))),
      p.pinning_sites > 8 ? el("p", { class: "muted small" }, "… and " + fmtInt(p.pinning_sites - 8) + " more sites") : null,
      el("ul", { class: "plain pinners-words", "data-testid": "pinners-words" }, p.words.map((w) => el("li", null, w))));
  }
