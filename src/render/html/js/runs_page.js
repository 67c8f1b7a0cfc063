  // ================================================================ js/runs_page.js
  // Runs page. Its window.memlens: what drivers and tests read (ready, errors, the plot after
  // every draw, the moment pair or the run shown, where a moment is on the plot); and PAGE, the
  // page's name in its console messages.
  const ML = (window.memlens = {
    ready: false,
    errors: [],
    // After every draw: {axis, layout, mode, width, height, x_max, scale_bytes, canvases}.
    plot: null,
    // The moment pair shown (its index in pair.moments), or the run shown (many runs).
    moment: null,
    run: null,
    // Client coordinates of moment pair i on the plot (for drivers), or null.
    momentPoint: function () { return null; },
  });
  const PAGE = "memlens runs";
