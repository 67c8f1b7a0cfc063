// ================================================================ js/prelude.js
// Both pages (the report page, the runs page). Opens the one function each page's script runs in:
// the modules of src/render/html/js/ follow in the order src/render/html/mod.rs lists them
// (REPORT_MODULES, RUNS_MODULES), and the page's main module closes it. Every number shown comes
// from the analyses (the JSON in #memlens-data): the scripts decode, lay out, format and
// hit-test.
"use strict";
(function () {
