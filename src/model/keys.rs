//! Dict keys and action names recognised once per string object, not once per use.
//!
//! A snapshot names the keys of its millions of trace entries with a handful of memoized
//! strings, so a string is identified by where it lies in the input: a small direct-mapped
//! cache from that offset to what the bytes said replaces a byte comparison per key.

use super::snapshot::Action;
use crate::pickle::{Heap, Value};

/// A key that the model's converters look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    Action,
    Addr,
    Size,
    Stream,
    TimeUs,
    Frames,
    DeviceFree,
    CompileContext,
    UserMetadata,
    InternalMetadata,
    ForwardFrames,
    PoolId,
    Blocks,
    Filename,
    State,
    Stage,
    TotalSize,
    Other,
}

impl Key {
    /// The key spelled `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Key {
        match bytes {
            b"action" => Key::Action,
            b"addr" => Key::Addr,
            b"size" => Key::Size,
            b"stream" => Key::Stream,
            b"time_us" => Key::TimeUs,
            b"frames" => Key::Frames,
            b"device_free" => Key::DeviceFree,
            b"compile_context" => Key::CompileContext,
            b"user_metadata" => Key::UserMetadata,
            b"internal_metadata" => Key::InternalMetadata,
            b"forward_frames" => Key::ForwardFrames,
            b"pool_id" => Key::PoolId,
            b"blocks" => Key::Blocks,
            b"filename" => Key::Filename,
            b"state" => Key::State,
            b"stage" => Key::Stage,
            b"total_size" => Key::TotalSize,
            _ => Key::Other,
        }
    }
}

const SLOTS: usize = 256;

/// Offset-keyed caches of [`Key`]s and [`Action`]s for one input buffer.
pub(crate) struct KeyCache {
    keys: [(u64, Key); SLOTS],
    actions: [(u64, Action); SLOTS],
}

impl Default for KeyCache {
    fn default() -> Self {
        KeyCache {
            keys: [(u64::MAX, Key::Other); SLOTS],
            actions: [(u64::MAX, Action::Other); SLOTS],
        }
    }
}

fn slot(off: u64) -> usize {
    (off.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize
}

impl KeyCache {
    /// What key `k` is (`Key::Other` for anything not a string the converters use).
    #[inline]
    pub(crate) fn key(&mut self, heap: &Heap, k: Value) -> Key {
        if let Value::Str { off, .. } = k {
            let s = &mut self.keys[slot(off)];
            if s.0 == off {
                return s.1;
            }
            let key = heap.str_bytes(k).map_or(Key::Other, Key::of);
            *s = (off, key);
            return key;
        }
        heap.str_bytes(k).map_or(Key::Other, Key::of)
    }

    /// The action named by the string `v` with bytes `name`.
    #[inline]
    pub(crate) fn action(&mut self, v: Value, name: &[u8]) -> Action {
        if let Value::Str { off, .. } = v {
            let s = &mut self.actions[slot(off)];
            if s.0 == off {
                return s.1;
            }
            let a = Action::parse(name);
            *s = (off, a);
            return a;
        }
        Action::parse(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_offset_answers_what_its_bytes_say() {
        let buf = b"actionframesallocxyz";
        let heap = Heap::new(buf);
        let mut c = KeyCache::default();
        let action = Value::Str { off: 0, len: 6 };
        let frames = Value::Str { off: 6, len: 6 };
        let other = Value::Str { off: 17, len: 3 };
        for _ in 0..2 {
            assert_eq!(c.key(&heap, action), Key::Action);
            assert_eq!(c.key(&heap, frames), Key::Frames);
            assert_eq!(c.key(&heap, other), Key::Other);
        }
        assert_eq!(c.key(&heap, Value::Int(3)), Key::Other);
        let alloc = Value::Str { off: 12, len: 5 };
        assert_eq!(c.action(alloc, b"alloc"), Action::Alloc);
        assert_eq!(c.action(alloc, b"alloc"), Action::Alloc);
    }
}
