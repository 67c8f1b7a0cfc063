  // ================================================================ js/report_page.js
  // Report page. Its window.memlens: what drivers, tests and scripts read (ready, errors, what
  // was drawn, the view, the pin, the moment shown); and PAGE, the page's name in its console
  // messages.
  const ML = (window.memlens = {
    ready: false,
    errors: [],
    drawn: { timeline_bands: 0, state_blocks: 0, flame_nodes: 0 },
    view: { first: null, last: null },
    pinned: null,
    bandPoint: function () { return null; },
    blockPoint: function () { return null; },
    device: null,
    moment: null,
    flameMatch: null,
    readyMs: null,
    // The moment the state, top and flame sections show: {name, event_index, live_bytes}.
    momentShown: null,
    // The plot after every draw: CSS pixels of #timeline-plot, the bytes at its top edge, the
    // events at its left and right edges (event e spans [e, e + 1) in x).
    plot: null,
  });
  const started = performance.now();
  const PAGE = "memlens report";
