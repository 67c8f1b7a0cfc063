  // ================================================================ js/header.js
  // Report page. The header section: file, layout, capacity, devices, a link to the data-quality
  // notes (js/notes.js), the contents, the files a server serves, and the device selector.
  function renderHeader() {
    const s = sections.header;
    const sum = DATA.summary;
    const devs = sum.devices || [];
    const nav = el("nav", { class: "toc" }, [["oom", "OOM"], ["advice", "What to change"], ["notes", "Data quality"], ["timeline", "Timeline"], ["state", "Allocator state"], ["top", "Top sites"], ["lines", "Source lines"], ["flame", "Flamegraph"], ["leaks", "Leaks"], ["categories", "Categories"], ["summary", "Summary"]]
      .filter(([id]) => (id !== "oom" || DATA.oom) && (id !== "notes" || hasNotes()))
      .map(([id, t]) => el("a", { href: "#" + id }, t)));
    const devTable = el("table", { class: "grid compact" },
      el("thead", null, el("tr", null, el("th", null, "device"), el("th", { class: "num" }, "reserved"), el("th", { class: "num" }, "allocated"), el("th", { class: "num" }, "segments"), el("th", { class: "num" }, "trace entries"))),
      el("tbody", null, devs.map((d) => el("tr", null, el("td", null, devName(d.device)), bytesCell(d.reserved_bytes), bytesCell(d.allocated_bytes), el("td", { class: "num" }, fmtInt(d.segments)), el("td", { class: "num" }, fmtInt(d.trace_entries))))));
    let select = null;
    if (DATA.devices.length > 1) {
      select = el("label", { class: "devsel" }, "Device ",
        el("select", { id: "device-select", onchange: (e) => selectDevice(DATA.devices.findIndex((d) => String(d.device) === e.target.value)) },
          DATA.devices.map((d, i) => el("option", { value: d.device, selected: i === S.dev }, devName(d.device)))),
        el("span", { class: "muted" }, " the sections below show this device"));
    }
    fill(s, 
      el("div", { class: "title-row" },
        el("h1", null, el("span", { class: "brand" }, "memlens"), " report"),
        el("span", { class: "mono file", title: DATA.file }, DATA.file)),
      el("div", { class: "meta" },
        el("span", null, "layout ", el("b", null, DATA.layout)),
        el("span", null, "devices ", el("b", null, String(DATA.devices.length))),
        el("span", { "data-testid": "capacity" }, "capacity ", DATA.capacity_shown
          ? [el("b", { "data-bytes": String(DATA.capacity_shown.bytes) }, fmtBytes(DATA.capacity_shown.bytes)), el("span", { class: "muted" }, " (" + DATA.capacity_shown.source + ")")]
          : el("b", null, "not known (pass --gpu or --capacity)")),
        el("span", null, "memlens ", el("b", null, DATA.memlens_version))),
      devs.length ? devTable : null,
      hasNotes() ? el("p", { class: "muted" }, "Data quality notes: ", el("a", { href: "#notes" }, (sum.warnings || []).length + DATA.absent.length + " below the answer"), ".") : null,
      nav,
      servedFiles(),
      select);
  }
  // Served with other files: a link to each file's page and to the page of all of them.
  function servedFiles() {
    if (!SERVE || !SERVE.files || SERVE.files.length < 2) return null;
    const href = (path, q) => path + "?" + new URLSearchParams(Object.assign({ token: TOKEN || "" }, q)).toString();
    return el("nav", { class: "toc", id: "served-files" }, el("span", { class: "muted" }, "files served: "),
      SERVE.files.map((f, i) => i === SERVE.file ? el("b", { class: "mono" }, f) : el("a", { class: "mono", href: href("/", { file: String(i) }) }, f)),
      el("a", { href: href("/runs", {}), "data-testid": "runs-link" }, SERVE.files.length === 2 ? "compare the two" : "all runs together"));
  }
  function selectDevice(i) {
    if (i < 0) return;
    S.dev = i;
    S.moment = 0;
    S.pinned = null;
    ML.pinned = null;
    ML.device = devId();
    renderDevice();
  }
  function syncDeviceSelect() {
    const sel = document.getElementById("device-select");
    if (sel) sel.value = String(devId());
  }
