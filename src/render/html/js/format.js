  // ================================================================ js/format.js
  // Both pages. Numbers and text as the pages write them: bytes in IEC units (KiB, MiB, GiB;
  // fmtAxis without trailing zeros, for axis ticks; fmtSigned with its sign), counts with
  // thousands separators, shares as percentages, durations, addresses, times since the trace's
  // first event, text with `code` spans, paths that may break after "/" and ":", and the table
  // cells of bytes (the exact count in the title and in data-bytes), signed bytes and shares.
  const UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  // Two decimals as the CLI writes them (Rust's formatting): an exact tie (an odd multiple of
  // 1/8, the only ties a double can hold at two decimals) rounds to even, where toFixed rounds
  // up; so 1.625 MiB reads 1.62 MiB on the page as in the terminal.
  function fixed2(v) {
    if (Number.isInteger(v * 8) && !Number.isInteger(v * 4)) {
      const f = Math.floor(v * 100);
      return ((f % 2 === 0 ? f : f + 1) / 100).toFixed(2);
    }
    return v.toFixed(2);
  }
  // Bytes below 1 KiB, else two decimals of the largest unit that keeps the figure, as
  // printed, at least 1 (1 GiB less a byte reads 1.00 GiB, not 1024.00 MiB), as the CLI does.
  function fmtBytes(n) {
    if (n == null) return "unknown";
    const neg = n < 0;
    let v = Math.abs(n);
    if (v < 1024) return (neg ? "-" : "") + v + " B";
    v /= 1024;
    let u = 0;
    while (u < UNITS.length - 1 && (v >= 1024 || fixed2(v) === "1024.00")) { v /= 1024; u++; }
    return (neg ? "-" : "") + fixed2(v) + " " + UNITS[u];
  }
  function fmtAxis(n) {
    return fmtBytes(n).replace(/\.00 /, " ").replace(/(\.\d)0 /, "$1 ");
  }
  function fmtSigned(n) { return n == null ? "–" : (n > 0 ? "+" : "") + fmtBytes(n); }
  function fmtInt(n) { return n == null ? "–" : Number(n).toLocaleString("en-US"); }
  function fmtMs(us) { return us == null ? "–" : (us / 1e3).toFixed(1) + " ms"; }
  function fmtPct(x) { return x == null ? "–" : (x * 100).toFixed(x < 0.001 && x > 0 ? 3 : 1) + "%"; }
  function hex(a) { return a == null ? "–" : "0x" + Number(a).toString(16); }
  function fmtRel(us, origin) {
    if (us == null || origin == null) return null;
    const d = us - origin;
    if (Math.abs(d) >= 10e6) return "t+" + (d / 1e6).toFixed(3) + " s";
    return "t+" + (d / 1e3).toFixed(3) + " ms";
  }
  // Text with `code` spans, as the analyses write commands and names.
  function rich(t) {
    const parts = String(t).split("`");
    if (parts.length < 3) return String(t);
    return parts.map((x, i) => (i % 2 && i < parts.length - 1 ? el("code", null, x) : (i % 2 ? "`" + x : x)));
  }
  // A path or site with break opportunities after "/" and ":".
  function path(t) {
    const out = [];
    for (const piece of String(t).split(/(?<=[/:])/)) { out.push(piece); out.push(el("wbr")); }
    out.pop();
    return out;
  }
  // A cell of bytes: IEC units shown, the exact count in its title and its data-bytes (what
  // the browser tests read back); `cls`, more classes.
  function bytesCell(n, cls) {
    return el("td", { class: "num" + (cls ? " " + cls : ""), title: fmtInt(n) + " bytes", "data-bytes": n == null ? null : String(n) }, fmtBytes(n));
  }
  // A change in bytes: signed, coloured by its direction.
  function signedCell(n) {
    return el("td", { class: "num " + (n > 0 ? "up" : n < 0 ? "down" : ""), title: fmtInt(n) + " bytes", "data-bytes": n == null ? null : String(n) }, fmtSigned(n));
  }
  // A share: a bar of its width beside the percentage.
  function shareCell(x) {
    return el("td", { class: "num share" }, el("span", { class: "track" }, el("span", { class: "bar", style: "width:" + Math.max(0, Math.min(100, x * 100)).toFixed(1) + "%" })), el("span", { class: "pct" }, fmtPct(x)));
  }
