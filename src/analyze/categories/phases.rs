//! The phases of a trace the category rules need: backward passes, optimizer calls and
//! forward passes, each a *burst* of allocations ([`crate::replay::passes`], where a
//! backward pass is defined once for the steps and the categories).
//!
//! A burst begins at an allocation of its kind and goes on while allocations are of that kind
//! (frees never end one); the first allocation of another kind ends it. That allocation's
//! index is the burst's `end`: what is still live there outlived the phase (a gradient past
//! its backward pass, an optimizer's state past its `step`, a forward pass's outputs).

pub use crate::replay::passes::{Burst, Bursts};
