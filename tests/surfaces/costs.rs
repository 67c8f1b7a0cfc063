//! Issue 36: costs (see tests/surfaces.rs).
