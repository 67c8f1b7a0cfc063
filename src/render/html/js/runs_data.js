  // ================================================================ js/runs_data.js
  // Runs page. Its data: the JSON in #memlens-data (compose::runs::RunsPage) and #memlens-serve,
  // each run's colour and name, the view state S (axis, layout, mode, scale), and where a point
  // or an event of a run is on the axis chosen.
  const DATA = JSON.parse(document.getElementById("memlens-data").textContent);
  const SERVE = JSON.parse(document.getElementById("memlens-serve").textContent);
  const PAIR = DATA.pair;
  const RUNS = DATA.runs;
  const OUTLIER = "#e15759", RESERVED = "#1f2937", MARKER = "#7c3aed";
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac", "#ff9da7"];
  function color(i) {
    if (PAIR) return i === 0 ? PALETTE[0] : PALETTE[1];
    if (i === DATA.outlier) return OUTLIER;
    return PALETTE[i % PALETTE.length];
  }
  function runName(i) {
    if (PAIR) return i === 0 ? "base" : "candidate";
    const r = RUNS[i];
    return r.rank != null && DATA.imbalance && DATA.imbalance.ranks.some((k) => k.rank === r.rank && k.file === r.file) ? "rank " + r.rank : "run " + i;
  }
  function fileOf(i) { return RUNS[i].file; }

  // The view: the axis, runs overlaid or stacked, bytes or their difference, one scale or each run's own.
  const S = { axis: DATA.axes.includes("step") && PAIR ? "step" : "event", layout: "overlaid", mode: "absolute", scale: "shared" };
  const AXIS_WORDS = { event: "event index", time: "time since the first event", step: "step" };
  function coord(p) { return S.axis === "event" ? p.event : S.axis === "time" ? p.time_us : p.step_x; }
  // The place of event e of run i on the current axis (null when it has none).
  function placeOf(i, e) {
    const r = RUNS[i];
    if (e == null || e < 0) return 0;
    if (S.axis === "event") return e;
    if (S.axis === "time") {
      const pts = r.points;
      let best = null;
      for (const p of pts) { if (p.event <= e && p.time_us != null) best = p.time_us; else if (p.event > e) break; }
      return best;
    }
    for (let k = 0; k < r.steps.length; k++) {
      const s = r.steps[k];
      if (e >= s.first_event && e <= s.last_event) return k + (e - s.first_event) / (s.last_event - s.first_event + 1);
    }
    return null;
  }
  function xMax() {
    let m = 1;
    for (const r of RUNS) {
      if (!r.points.length) continue;
      if (S.axis === "event") m = Math.max(m, r.events);
      else if (S.axis === "time") m = Math.max(m, r.duration_us || 1);
      else m = Math.max(m, r.steps.length);
    }
    return m;
  }
