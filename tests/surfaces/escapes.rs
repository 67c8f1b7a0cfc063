//! Issue 36: escapes (see tests/surfaces.rs).
