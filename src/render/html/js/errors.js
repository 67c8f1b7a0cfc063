  // ================================================================ js/errors.js
  // Both pages. What the page does when it fails: every error (thrown in a handler, uncaught, or
  // a rejected promise) is kept in window.memlens.errors, written to the console under the page's
  // name (PAGE) and shown in a box at the top, so a page that drew only part of itself says so;
  // guard(fn) is fn with its errors caught that way.
  function recordError(err) {
    const msg = err && err.stack ? String(err.stack).split("\n").slice(0, 4).join(" | ") : String((err && err.message) || err);
    ML.errors.push(msg);
    try {
      console.error(PAGE + ": " + msg);
      let box = document.getElementById("errors");
      if (!box) {
        box = el("div", { id: "errors", class: "errors", role: "alert" }, el("strong", null, "This page hit an error while drawing; some sections may be incomplete."));
        document.body.insertBefore(box, document.body.firstChild);
      }
      box.appendChild(el("div", { class: "mono" }, msg));
    } catch (_) { /* nothing more to do */ }
  }
  window.addEventListener("error", (e) => recordError(e.error || e.message));
  window.addEventListener("unhandledrejection", (e) => recordError(e.reason));
  function guard(fn) {
    return function () {
      try { return fn.apply(this, arguments); } catch (e) { recordError(e); }
    };
  }
