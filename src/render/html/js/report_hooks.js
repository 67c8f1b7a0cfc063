  // ================================================================ js/report_hooks.js
  // Report page. Its hooks for drivers and tests (window.memlens functions): where a band or a
  // block is on screen, a band's allocation, the bands' count, device selection, zoom, the events
  // shown.
  // A point inside band i where it is painted alone (for tests and scripts), or null.
  ML.bandPoint = function (i) {
    const T = S.tl;
    if (!T || !T.bands[i] || !T.geo || !T.cols) return null;
    const r0 = T.over.getBoundingClientRect();
    if (r0.top < 0 || r0.bottom > window.innerHeight) T.over.scrollIntoView({ block: "center" });
    const C = T.cols, B = T.bands[i], b = B.b;
    if (b.size * C.perByte < MIN_ROWS + 1) return null;
    const row = (v) => Math.round(C.rows - v * C.perByte);
    let best = null, run = 0, bestRun = 0, start = 0;
    for (let c = 0; c <= C.cols; c++) {
      const s = c < C.cols ? C.pick[c] : -1;
      const ok = s >= 0 && b.first_sample <= s && s <= b.last_sample;
      if (ok) { if (!run) start = c; run++; }
      if ((!ok || c === C.cols) && run) {
        if (run > bestRun) {
          const mid = start + (run >> 1), base = bandBaseAt(B, C.pick[mid]);
          if (base != null && row(base) - row(base + b.size) >= 2) { bestRun = run; best = [mid, (row(base) + row(base + b.size)) / 2]; }
        }
        run = 0;
      }
    }
    if (!best) return null;
    const r = T.over.getBoundingClientRect();
    return { x: r.left + (C.L + best[0] + 0.5) / C.dpr, y: r.top + (C.TOP + best[1]) / C.dpr };
  };
  // Band i of the timeline shown (its allocation), and how many there are.
  ML.bandInfo = function (i) {
    const T = S.tl, B = T && T.bands[i];
    return B ? { address: B.b.address, alloc_event: B.b.alloc_event, free_event: B.b.free_event, size: B.b.size } : null;
  };
  ML.bandCount = function () { return S.tl ? S.tl.bands.length : 0; };
  // Show device `id` (as the device selector does); false when the page has no such device.
  ML.selectDevice = function (id) {
    const i = DATA.devices.findIndex((d) => d.device === id);
    if (i < 0) return false;
    selectDevice(i);
    syncDeviceSelect();
    return true;
  };
  // Zoom to events first…last; resolved once that window is drawn at the page's full detail.
  ML.zoom = function (first, last) { return zoomTo(first, last); };
  // The trace events of the window shown, when the page has them (served, every event).
  ML.windowEvents = function () {
    const T = S.tl;
    return T && T.src.events ? { index: T.src.events.index.slice(), action: T.src.events.action.slice(), size: T.src.events.size.slice() } : null;
  };
  // Where block k of segment row r is on screen (scrolled into view), for the browser tests.
  ML.blockPoint = function (r, k) {
    if (!ST || !ST.segs[r] || !ST.segs[r].blocks[k]) return null;
    const sg = ST.segs[r], bl = sg.blocks[k];
    ST.scroll.scrollTop = Math.max(0, r * ST.rowH - ST.rowH);
    drawState();
    ST.canvas.scrollIntoView({ block: "center" });
    const rect = ST.canvas.getBoundingClientRect();
    const scale = ST.fit ? ST.pw / sg.size : ST.pw / ST.maxSeg;
    return { x: rect.left + ST.gut + (bl[0] + bl[1] / 2) * scale, y: rect.top + r * ST.rowH - ST.scroll.scrollTop + ST.rowH / 2, width: bl[1] * scale };
  };
