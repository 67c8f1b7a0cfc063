  // ================================================================ js/summary.js
  // Report page. The summary section: per device the final state's figures, its pools and its
  // trace; pinned host memory; the allocator settings.
  function renderSummary() {
    const s = sections.summary;
    const sum = DATA.summary;
    const cols = [["segments", "segments", fmtInt], ["blocks", "blocks", fmtInt], ["reserved", "reserved_bytes", fmtBytes], ["allocated", "allocated_bytes", fmtBytes],
      ["requested", "requested_bytes", fmtBytes], ["rounding waste", "rounding_waste_bytes", fmtBytes], ["pending free", "pending_free_bytes", fmtBytes],
      ["inactive", "inactive_bytes", fmtBytes], ["largest inactive", "largest_inactive_block_bytes", fmtBytes], ["trace entries", "trace_entries", fmtInt],
      ["expandable", "expandable_segments", fmtInt], ["private pool segs", "private_pool_segments", fmtInt]];
    const d = devId();
    const dev = (sum.devices || []).find((x) => x.device === d);
    const settings = sum.allocator_settings;
    fill(s, heading("Summary", fmtInt(sum.distinct_frames) + " distinct frames · " + fmtInt(sum.distinct_stacks) + " stacks · " + fmtInt(sum.annotations) + " annotations"),
      table([["device"]].concat(cols.map(([l]) => [l, 1])),
        (sum.devices || []).map((x) => el("tr", { class: x.device === d ? "current" : null }, el("td", null, devName(x.device)), cols.map(([, k, f]) => el("td", { class: "num" }, f(x[k])))))),
      dev && dev.pools && dev.pools.length ? el("div", null, el("h3", null, "Pools of " + devName(d) + " (final state)"),
        el("table", { class: "grid compact" },
          el("thead", null, el("tr", null, ["pool", "private pool", "stream", "segments", "reserved", "allocated", "inactive", "largest inactive"].map((h, i) => el("th", { class: i > 2 ? "num" : null }, h)))),
          el("tbody", null, dev.pools.map((p) => el("tr", null, el("td", null, p.pool), el("td", null, p.pool_id[0] || p.pool_id[1] ? p.pool_id.join(",") : "–"), el("td", { class: "mono" }, hex(p.stream)),
            el("td", { class: "num" }, fmtInt(p.segments)), bytesCell(p.reserved_bytes), bytesCell(p.allocated_bytes), bytesCell(p.inactive_bytes), bytesCell(p.largest_inactive_block_bytes)))))) : null,
      dev && dev.trace ? el("p", { class: "muted" }, "Trace of " + devName(d) + ": " + Object.entries(dev.trace.by_action || {}).map(([k, v]) => k + " " + fmtInt(v)).join(" · ")) : null,
      sum.host ? el("div", { id: "host-memory" }, el("h3", null, "Pinned host memory (its own pool; no device's figures include it)"),
        el("table", { class: "grid compact" },
          el("thead", null, el("tr", null, ["segments", "blocks", "reserved", "allocated", "requested", "pending free", "inactive", "largest inactive", "trace entries", "peak live"].map((h) => el("th", { class: "num" }, h)))),
          el("tbody", null, el("tr", null, el("td", { class: "num" }, fmtInt(sum.host.segments)), el("td", { class: "num" }, fmtInt(sum.host.blocks)),
            bytesCell(sum.host.reserved_bytes), bytesCell(sum.host.allocated_bytes), bytesCell(sum.host.requested_bytes), bytesCell(sum.host.pending_free_bytes),
            bytesCell(sum.host.inactive_bytes), bytesCell(sum.host.largest_inactive_block_bytes), el("td", { class: "num" }, fmtInt(sum.host.trace_entries)),
            sum.host.peak_live_bytes == null ? el("td", { class: "num muted" }, "–") : bytesCell(sum.host.peak_live_bytes))))) : null,
      settings ? el("div", null, el("h3", null, "Allocator settings"),
        el("dl", { class: "kv settings" }, Object.entries(settings).map(([k, v]) => [el("dt", { class: "mono" }, k),
          el("dd", { class: "mono" }, v === "" ? "(empty)" : typeof v === "object" && v ? (Object.entries(v).filter(([, x]) => x).map(([a, b]) => a + ":" + b).join(", ") || "all 0") : String(v))]))) :
        el("p", { class: "muted" }, "The snapshot records no allocator settings."));
  }
