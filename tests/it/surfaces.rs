//! Issue 36's hostile inputs on the surfaces added after the first campaign: budgets that the
//! file can only bound from below, snapshot strings reaching terminals, Markdown and SVG, batch
//! streams, costs on deep stacks and many streams, bombs with a valid start, and the smaller
//! cases. One module per promise; each crafts its inputs in code (nothing large is checked in)
//! and runs the binary. `docs/hostile-input.md` lists every case with the rule that now holds.

use crate::common;

#[path = "surfaces/budgets.rs"]
mod budgets;
#[path = "surfaces/costs.rs"]
mod costs;
#[path = "surfaces/escapes.rs"]
mod escapes;
#[path = "surfaces/smaller.rs"]
mod smaller;
#[path = "surfaces/streams.rs"]
mod streams;
