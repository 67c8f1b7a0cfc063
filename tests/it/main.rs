//! memlens's integration tests, in one test binary (issue 38): each module is one former
//! `tests/NAME.rs` binary, and `tests/common` is their one support module. One binary links
//! the library, its dependencies and the test support once instead of 39 times, which was
//! most of the time of `cargo test` on a 2-core CI.
//!
//! Run one module with a filter: `cargo test --release --test it golden::` (the goldens),
//! `cargo test --release --test it report::` (the browser tests of `memlens report`). Tests of
//! one process run on parallel threads: a test passes what it changes (environment, working
//! directory) to the child `Command` it starts, never to the process (`std::env::set_var`).

// The fuzz targets' harnesses (fuzz/fuzz_targets/*.rs) are shared with the fuzz crate,
// which builds each of them (and tests/common/canonical.rs) as its own module: the tests
// that run them here include the same files again, on purpose.
#![allow(clippy::duplicate_mod)]

#[path = "../common/mod.rs"]
mod common;

mod absent;
mod advice;
mod annotations;
mod batch;
mod binary;
mod capture;
mod captured;
mod categories;
mod check;
mod cli;
mod cli_details;
mod compare_page;
mod corruption;
mod dataset;
mod diff;
mod diff_lines;
mod diff_phases;
mod diff_runs;
mod explain;
mod export;
mod fit;
mod fleet;
mod frames2026;
mod fuzz_outputs;
mod fuzz_targets;
mod golden;
mod golden_outputs;
mod hostile;
mod judgement;
mod judgements;
mod leaks;
mod line_readings;
mod lines;
mod newer;
mod no_panic;
mod oom;
mod page2026;
mod paint;
mod parallel;
mod pinners;
mod pools;
mod promises;
mod properties;
mod python_package;
mod readings;
mod real;
mod real_readings;
mod replay;
mod report;
mod roundtrip;
mod salvage;
mod schemas;
mod serve;
mod serve_limits;
mod session;
mod settings2026;
mod sites;
mod store;
mod support;
mod surfaces;
mod terminal;
mod timings;
mod whatif;
mod wrapping;
mod written;

/// The integration tests stay one binary: a new `tests/NAME.rs` would be linked as one more
/// (cargo's auto-discovery still runs it), so it belongs here as `tests/it/NAME.rs`.
#[test]
fn the_integration_tests_are_one_binary() {
    let stray: Vec<_> = std::fs::read_dir(common::root().join("tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    assert!(
        stray.is_empty(),
        "{stray:?}: move each into tests/it/ and add `mod NAME;` to tests/it/main.rs"
    );
}
