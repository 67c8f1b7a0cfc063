  // ================================================================ js/dom.js
  // Both pages. Building the page: an element with its attributes, handlers and children (el),
  // appending and replacing children (append, fill), the page's sections (section, kept in
  // `sections` by id), a section's heading, and a table in its scrolling wrapper.
  function el(tag, attrs) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        const v = attrs[k];
        if (v == null || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = v;
        // Through the CSSOM: the page's policy allows no style attribute.
        else if (k === "style") e.style.cssText = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), guard(v));
        else e.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (let i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }
  function append(parent, kid) {
    if (kid == null || kid === false) return;
    if (Array.isArray(kid)) { for (const k of kid) append(parent, k); return; }
    parent.appendChild(typeof kid === "object" ? kid : document.createTextNode(String(kid)));
  }
  function fill(node) {
    node.textContent = "";
    for (let i = 1; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }
  // The page's sections by id, each a card the page's main module places.
  const sections = {};
  function section(id) {
    const s = el("section", { id: id, class: "card" });
    sections[id] = s;
    return s;
  }
  function heading(title, sub) {
    return el("div", { class: "sec-head" }, el("h2", null, title), sub ? el("span", { class: "sub" }, sub) : null);
  }
  // A table: `head` lists [label, numeric] per column (numeric columns right-aligned), `rows`
  // its rows (elements, arrays of them, nulls skipped), `cls` more classes of the table.
  function table(head, rows, cls) {
    return el("div", { class: "table-wrap" }, el("table", { class: "grid" + (cls ? " " + cls : "") },
      el("thead", null, el("tr", null, head.map(([h, num]) => el("th", { class: num ? "num" : null }, h)))),
      el("tbody", null, rows)));
  }
