//! The typed snapshot model and its builder.
//!
//! In: decoded pickle values (through the decoder's hooks). Out: a [`Snapshot`] with interned
//! frames and stacks, compact segments, blocks and trace events, and data-quality warnings;
//! what a frame is (`kinds`, `cpp_names`), which the replay's step finding and the analyses
//! share.

pub mod bounds;
pub mod build;
pub mod coverage;
pub mod cpp_names;
mod error;
pub mod ids;
pub mod intern;
mod keys;
pub mod kinds;
pub mod live_addrs;
pub mod snapshot;
pub mod traceback;
pub mod validate;

pub use build::{build, build_arriving, default_threads, Arriving, BuildOptions, Strategy};
pub use error::BuildError;
pub use ids::{FrameId, FxId, StackId, StrId, StreamId, TagsId};
pub use intern::{EventTags, Frame, Frames, FxNode, PerStack, Stacks, Strings, Tags};
pub use snapshot::*;
