  // ================================================================ js/report_data.js
  // Report page. Its data: the JSON in #memlens-data, the served page's #memlens-serve and token,
  // the view state S (device, moment, frame toggles, pin, timeline), and the lookups over them
  // (the device shown, its name, the moment shown, absent notes, site labels).
  const DATA = JSON.parse(document.getElementById("memlens-data").textContent);
  // A page served by `memlens serve`: the files served and which one this is (null: static).
  const SERVE = (function () { const e = document.getElementById("memlens-serve"); return e ? JSON.parse(e.textContent) : null; })();
  const TOKEN = SERVE ? new URLSearchParams(location.search).get("token") : null;
  // The page opens on the device Rust chose (the first OOM's, else the highest peak's).
  const S = { dev: Math.max(0, DATA.devices.findIndex((d) => d.device === DATA.first_device)), moment: 0, showCpp: true, showTorch: true, pinned: null, tl: null };
  // A site or context label as the text reports show it (the snapshot's root and library
  // prefixes stripped, computed by memlens: DATA.shown_sites), else as recorded.
  function shownSite(t) { return (DATA.shown_sites && Object.prototype.hasOwnProperty.call(DATA.shown_sites, t)) ? DATA.shown_sites[t] : t; }
  function devPage() { return DATA.devices[S.dev]; }
  // A device by the type its file names (summary.device_type: "xpu:1"), else "device 1":
  // the format has no key for it, so CUDA is never assumed.
  function devName(d) { const t = DATA.summary && DATA.summary.device_type; return t ? t.name + ":" + d : "device " + d; }
  function devId() { const d = devPage(); return d ? d.device : null; }
  function moment() { const d = devPage(); return d ? d.moments[S.moment] : null; }
  function momentLabel(m) {
    const n = m.name;
    if (n === "peak") return "Peak";
    if (n === "end") return devPage().timeline ? "End of trace" : "Final state";
    if (n === "at") return "--at moment";
    if (n === "window peak") return "Peak of the window shown";
    if (n.startsWith("oom:")) return "OOM " + n.slice(4);
    return n;
  }
  function absentFor(device) { return DATA.absent.filter((a) => a.device === device); }
