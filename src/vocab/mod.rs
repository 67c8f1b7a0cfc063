//! Shared vocabulary of the analyses: the facts and words several reports speak of, computed
//! from the model and the replay alone. Call sites and their labels ([`sites`]), devices
//! ([`devices`]), the GPU table ([`gpus`]), the units of advice (verdicts, fixes, costs, their
//! words: [`advice`]) and what a snapshot lacks ([`absence`]). Nothing here imports an
//! analysis ([`crate::analyze`]) or a composition ([`crate::compose`]).

pub mod absence;
pub mod advice;
pub mod devices;
pub mod gpus;
pub mod sites;
