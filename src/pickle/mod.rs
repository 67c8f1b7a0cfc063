//! A safe, zero-copy decoder for the data-only subset of Python's pickle format.
//!
//! In: the bytes of a pickle. Out: a [`Heap`] and the top-level [`Value`]. Strings stay in the
//! input; shared (memoized) objects are decoded once and referenced by handle; every opcode
//! that could name or run Python code is refused. Drivers convert containers into their own
//! compact types through [`Hooks`] while decoding, so memory stays near the size of the result.

mod decode;
mod error;
mod hooks;
mod limits;
pub mod machine;
pub mod ops;
pub mod scan;
mod stats;
pub mod value;
pub mod write;

pub use decode::{decode, decode_chunk, decode_planned, decode_salvage};
pub use error::DecodeError;
pub use hooks::{item_words, key_word, value_word, FlatList, Hooks, NoHooks};
pub use limits::Limits;
pub use stats::DecodeStats;
pub use value::{Heap, ListData, ObjData, ObjId, Value};
