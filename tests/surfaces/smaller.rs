//! Issue 36: smaller (see tests/surfaces.rs).
