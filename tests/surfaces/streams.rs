//! Issue 36: streams (see tests/surfaces.rs).
