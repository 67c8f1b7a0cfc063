//! Issue 36: budgets (see tests/surfaces.rs).
