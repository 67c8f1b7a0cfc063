//! Decoded values and the heap of containers they point into.
//!
//! A [`Value`] is 16 bytes and `Copy`: strings are byte ranges of the input (zero-copy),
//! containers are [`ObjId`] handles into the [`Heap`], and `Ext` values are handles owned by
//! whoever drives the decoder (the model builder turns a frame dict into `Ext{kind: FRAME, ..}`).
//! A shared (memoized) object is decoded once and referred to by handle, never deep-copied.

/// Handle of a container in the [`Heap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjId(pub u32);

/// One decoded pickle value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Python `None`.
    None,
    /// Python `bool`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// A non-negative integer in `2^63 .. 2^64` (lines of 2^64-1, XPU addresses).
    UInt(u64),
    /// An integer outside `-2^63 .. 2^64`; only its sign is kept.
    Huge(bool),
    /// Python `float`.
    Float(f64),
    /// A `str` stored as UTF-8 (possibly with surrogates) in the input at `off..off+len`.
    Str {
        /// Byte offset in the input.
        off: u64,
        /// Length in bytes.
        len: u32,
    },
    /// A `str` that had to be unescaped (protocol 0 `UNICODE`); index into [`Heap::owned`].
    Owned(u32),
    /// A `bytes` object at `off..off+len` of the input.
    Bytes {
        /// Byte offset in the input.
        off: u64,
        /// Length in bytes.
        len: u32,
    },
    /// A list, dict or tuple in the heap.
    Obj(ObjId),
    /// A handle defined by the decoder's driver (see [`super::Hooks`]).
    Ext {
        /// Driver-defined kind.
        kind: u8,
        /// Driver-defined index.
        id: u32,
    },
}

impl Value {
    /// A short name of the value's Python type, for error messages.
    pub fn type_name(&self, heap: &Heap) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) | Value::Huge(_) => "int",
            Value::Float(_) => "float",
            Value::Str { .. } | Value::Owned(_) => "str",
            Value::Bytes { .. } => "bytes",
            Value::Obj(id) => match heap.data(*id) {
                ObjData::List(_) => "list",
                ObjData::Dict(_) => "dict",
                ObjData::Tuple(_) => "tuple",
                ObjData::Replaced(_) | ObjData::Free => "converted object",
            },
            Value::Ext { .. } => "converted object",
        }
    }
}

/// Items of a list: either plain values, or a run of consecutive `Ext` ids of one kind
/// (how a trace list of a million converted events stays 12 bytes).
#[derive(Debug)]
pub enum ListData {
    /// Plain values.
    Items(Vec<Value>),
    /// `Ext{kind, id}` for `id` in `start..start+len`.
    Run {
        /// The Ext kind.
        kind: u8,
        /// First id.
        start: u32,
        /// Number of items.
        len: u32,
    },
}

impl ListData {
    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            ListData::Items(v) => v.len(),
            ListData::Run { len, .. } => *len as usize,
        }
    }
    /// True when the list has no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Item `i` (panics when out of range, like slice indexing).
    pub fn get(&self, i: usize) -> Value {
        match self {
            ListData::Items(v) => v[i],
            ListData::Run { kind, start, len } => {
                assert!(i < *len as usize);
                Value::Ext {
                    kind: *kind,
                    id: start + i as u32,
                }
            }
        }
    }
    /// All items, in order.
    pub fn iter(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }
    /// Appends `items`, keeping or starting a run where they continue one.
    fn extend(&mut self, items: &[Value]) {
        if let Some(Value::Ext { kind, id }) = items.first().copied() {
            let consecutive = items.iter().enumerate().all(|(i, v)| {
                matches!(*v, Value::Ext { kind: k, id: j } if k == kind && Some(j) == id.checked_add(i as u32))
            });
            if consecutive {
                match self {
                    ListData::Items(v) if v.is_empty() => {
                        *self = ListData::Run {
                            kind,
                            start: id,
                            len: items.len() as u32,
                        };
                        return;
                    }
                    ListData::Run {
                        kind: k,
                        start,
                        len,
                    } if *k == kind && start.checked_add(*len) == Some(id) => {
                        *len += items.len() as u32;
                        return;
                    }
                    _ => {}
                }
            }
        }
        if let ListData::Run { .. } = self {
            *self = ListData::Items(self.iter().collect());
        }
        if let ListData::Items(v) = self {
            v.extend_from_slice(items);
        }
    }

    /// Returns the items as a slice when they are stored as plain values.
    pub fn as_slice(&self) -> Option<&[Value]> {
        match self {
            ListData::Items(v) => Some(v),
            ListData::Run { .. } => None,
        }
    }

    #[cfg(test)]
    fn push(&mut self, v: Value) {
        match self {
            ListData::Items(items) => {
                if items.is_empty() {
                    if let Value::Ext { kind, id } = v {
                        *self = ListData::Run {
                            kind,
                            start: id,
                            len: 1,
                        };
                        return;
                    }
                }
                items.push(v)
            }
            ListData::Run { kind, start, len } => {
                if let Value::Ext { kind: k, id } = v {
                    if k == *kind && Some(id) == start.checked_add(*len) {
                        *len += 1;
                        return;
                    }
                }
                let mut items: Vec<Value> = self.iter().collect();
                items.push(v);
                *self = ListData::Items(items);
            }
        }
    }
}

/// What a heap slot holds.
#[derive(Debug)]
pub enum ObjData {
    /// A list.
    List(ListData),
    /// A dict as (key, value) pairs in insertion order (a later equal key is kept too; readers
    /// take the last).
    Dict(Vec<(Value, Value)>),
    /// A tuple.
    Tuple(Box<[Value]>),
    /// The object was converted by the driver into this value.
    Replaced(Value),
    /// An unused slot.
    Free,
}

#[derive(Debug)]
struct Obj {
    data: ObjData,
    /// Memo index this object was stored under, or `u32::MAX`.
    memo: u32,
    /// True once a second reference can exist (read back from the memo, duplicated,
    /// memoized twice): its slot is then never reused.
    escaped: bool,
}

const NO_MEMO: u32 = u32::MAX;

/// Containers, the memo and the input bytes.
pub struct Heap<'a> {
    /// The whole input.
    pub buf: &'a [u8],
    objs: Vec<Obj>,
    free: Vec<u32>,
    /// Strings that had to be unescaped.
    pub owned: Vec<String>,
    pub(crate) memo: Vec<Value>,
    /// Memo id of `memo[0]` (non-zero when decoding a chunk of a larger pickle).
    pub(crate) memo_base: u64,
    pub(crate) sparse_memo: rustc_hash::FxHashMap<u64, Value>,
    /// Emptied buffers of released dicts and lists, reused by the next ones (a converted
    /// event hands its buffers to the next event instead of back to the allocator).
    dict_pool: Vec<Vec<(Value, Value)>>,
    list_pool: Vec<Vec<Value>>,
    /// Scratch stack of [`Heap::release_children`].
    release_work: Vec<ObjData>,
    /// What the decode that filled this heap counted (its definitions decoded on demand,
    /// the dicts its fast path declined).
    pub stats: super::DecodeStats,
}

/// Most buffers kept for reuse per kind: more than one `APPENDS` batch (1000 items, all
/// alive until the batch is appended and converted).
const POOL_MAX: usize = 2048;
/// Buffers larger than this (in elements) go back to the allocator.
const POOL_CAP_MAX: usize = 4096;

impl<'a> Heap<'a> {
    /// An empty heap over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Heap {
            buf,
            objs: Vec::new(),
            free: Vec::new(),
            owned: Vec::new(),
            memo: Vec::new(),
            memo_base: 0,
            sparse_memo: Default::default(),
            dict_pool: Vec::new(),
            list_pool: Vec::new(),
            release_work: Vec::new(),
            stats: Default::default(),
        }
    }

    /// A new empty dict, reusing a released buffer when one is kept.
    pub(crate) fn new_dict(&mut self) -> Value {
        // At least 8 pairs, so a buffer reused from a small dict (a frame) rarely has to grow
        // for a big one (a trace entry).
        let pairs = self
            .dict_pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(8));
        self.alloc(ObjData::Dict(pairs))
    }

    /// A new empty list, reusing a released buffer when one is kept.
    pub(crate) fn new_list(&mut self) -> Value {
        let items = self
            .list_pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(16));
        self.alloc(ObjData::List(ListData::Items(items)))
    }

    /// Keeps the buffer of released `data` for reuse.
    fn recycle(&mut self, data: ObjData) {
        match data {
            ObjData::Dict(mut d)
                if self.dict_pool.len() < POOL_MAX && d.capacity() <= POOL_CAP_MAX =>
            {
                d.clear();
                self.dict_pool.push(d);
            }
            ObjData::List(ListData::Items(mut l))
                if self.list_pool.len() < POOL_MAX && l.capacity() <= POOL_CAP_MAX =>
            {
                l.clear();
                self.list_pool.push(l);
            }
            _ => {}
        }
    }

    /// Number of slots in use (live containers).
    pub fn live_objects(&self) -> usize {
        self.objs.len() - self.free.len()
    }

    pub(crate) fn alloc(&mut self, data: ObjData) -> Value {
        let obj = Obj {
            data,
            memo: NO_MEMO,
            escaped: false,
        };
        if let Some(i) = self.free.pop() {
            self.objs[i as usize] = obj;
            Value::Obj(ObjId(i))
        } else {
            self.objs.push(obj);
            Value::Obj(ObjId(self.objs.len() as u32 - 1))
        }
    }

    /// The content of a slot.
    pub fn data(&self, id: ObjId) -> &ObjData {
        &self.objs[id.0 as usize].data
    }

    pub(crate) fn data_mut(&mut self, id: ObjId) -> &mut ObjData {
        &mut self.objs[id.0 as usize].data
    }

    pub(crate) fn note_memoized(&mut self, v: Value, index: u64) {
        if let Value::Obj(id) = v {
            let obj = &mut self.objs[id.0 as usize];
            if obj.memo == NO_MEMO && index < NO_MEMO as u64 {
                obj.memo = index as u32;
            } else {
                obj.escaped = true;
            }
        }
    }

    pub(crate) fn note_escaped(&mut self, v: Value) {
        if let Value::Obj(id) = v {
            self.objs[id.0 as usize].escaped = true;
        }
    }

    /// Follows a converted object to the value it was converted to.
    pub fn resolve(&self, v: Value) -> Value {
        match v {
            Value::Obj(id) => match &self.objs[id.0 as usize].data {
                ObjData::Replaced(r) => *r,
                _ => v,
            },
            _ => v,
        }
    }

    /// The list behind `v`, if it is one.
    pub fn list(&self, v: Value) -> Option<&ListData> {
        match self.resolve(v) {
            Value::Obj(id) => match self.data(id) {
                ObjData::List(l) => Some(l),
                _ => None,
            },
            _ => None,
        }
    }

    /// The dict pairs behind `v`, if it is a dict.
    pub fn dict(&self, v: Value) -> Option<&[(Value, Value)]> {
        match self.resolve(v) {
            Value::Obj(id) => match self.data(id) {
                ObjData::Dict(d) => Some(d),
                _ => None,
            },
            _ => None,
        }
    }

    /// The items of a tuple or list behind `v`.
    pub fn sequence(&self, v: Value) -> Option<Vec<Value>> {
        match self.resolve(v) {
            Value::Obj(id) => match self.data(id) {
                ObjData::Tuple(t) => Some(t.to_vec()),
                ObjData::List(l) => Some(l.iter().collect()),
                _ => None,
            },
            _ => None,
        }
    }

    /// The raw bytes of a `str` value (UTF-8, possibly with surrogates).
    #[inline]
    pub fn str_bytes(&self, v: Value) -> Option<&[u8]> {
        match v {
            Value::Str { off, len } => Some(&self.buf[off as usize..off as usize + len as usize]),
            Value::Owned(i) => Some(self.owned[i as usize].as_bytes()),
            _ => None,
        }
    }

    /// A `str` value as text; invalid UTF-8 (lone surrogates) becomes U+FFFD.
    pub fn text(&self, v: Value) -> Option<std::borrow::Cow<'_, str>> {
        self.str_bytes(v).map(String::from_utf8_lossy)
    }

    /// Looks `key` up in the dict behind `v` (the last pair with that key wins, as in Python).
    pub fn get(&self, v: Value, key: &str) -> Option<Value> {
        let pairs = self.dict(v)?;
        pairs
            .iter()
            .rev()
            .find(|(k, _)| self.str_bytes(*k) == Some(key.as_bytes()))
            .map(|(_, val)| self.resolve(*val))
    }

    pub(crate) fn list_extend(&mut self, id: ObjId, items: &[Value]) {
        if let ObjData::List(l) = self.data_mut(id) {
            l.extend(items)
        }
    }

    /// Appends `(key, value)` pairs given flat as `[k0, v0, k1, v1, ...]`.
    pub(crate) fn dict_extend(&mut self, id: ObjId, flat: &[Value]) {
        if let ObjData::Dict(d) = self.data_mut(id) {
            d.extend(flat.chunks_exact(2).map(|p| (p[0], p[1])))
        }
    }

    /// Records that object `id` was converted into `to` by the driver and releases its content.
    ///
    /// The memo entry pointing at the object now yields `to`. The slot is reused unless a
    /// second reference to it may exist; then it stays as `Replaced(to)`. Children that no
    /// one else can reach (not memoized, not escaped) are released too.
    pub fn convert(&mut self, id: ObjId, to: Value) {
        let obj = &mut self.objs[id.0 as usize];
        let old = if obj.escaped {
            std::mem::replace(&mut obj.data, ObjData::Replaced(to))
        } else {
            if obj.memo != NO_MEMO {
                // Only while the slot still holds this object: a later PUT to the same id
                // rebinds it (pickle semantics), and must not be undone by this conversion.
                let m = obj.memo as u64;
                let rel = m.wrapping_sub(self.memo_base) as usize;
                let me = Value::Obj(id);
                if m >= self.memo_base && rel < self.memo.len() {
                    if self.memo[rel] == me {
                        self.memo[rel] = to;
                    }
                } else if let Some(slot) = self.sparse_memo.get_mut(&m) {
                    if *slot == me {
                        *slot = to;
                    }
                }
            }
            let old = std::mem::replace(&mut obj.data, ObjData::Free);
            self.free.push(id.0);
            old
        };
        self.release_children(old);
    }

    fn release_children(&mut self, data: ObjData) {
        let mut work = std::mem::take(&mut self.release_work);
        work.push(data);
        while let Some(data) = work.pop() {
            let visit = |v: Value, work: &mut Vec<ObjData>, heap: &mut Heap| {
                if let Value::Obj(c) = v {
                    let obj = &mut heap.objs[c.0 as usize];
                    if obj.memo == NO_MEMO && !obj.escaped && !matches!(obj.data, ObjData::Free) {
                        work.push(std::mem::replace(&mut obj.data, ObjData::Free));
                        heap.free.push(c.0);
                    }
                }
            };
            match &data {
                ObjData::List(ListData::Items(items)) => {
                    for &v in items {
                        visit(v, &mut work, self)
                    }
                }
                ObjData::Dict(pairs) => {
                    for &(k, v) in pairs {
                        visit(k, &mut work, self);
                        visit(v, &mut work, self);
                    }
                }
                ObjData::Tuple(items) => {
                    for v in items.iter() {
                        visit(*v, &mut work, self)
                    }
                }
                _ => {}
            }
            self.recycle(data);
        }
        self.release_work = work;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Value>(), 16);
    }

    #[test]
    fn ext_runs_compress_and_expand() {
        let mut l = ListData::Items(Vec::new());
        for id in 5..9 {
            l.push(Value::Ext { kind: 1, id });
        }
        assert!(matches!(
            l,
            ListData::Run {
                start: 5,
                len: 4,
                ..
            }
        ));
        l.push(Value::Ext { kind: 1, id: 20 });
        assert!(matches!(l, ListData::Items(_)));
        let ids: Vec<_> = l
            .iter()
            .map(|v| match v {
                Value::Ext { id, .. } => id,
                _ => 0,
            })
            .collect();
        assert_eq!(ids, vec![5, 6, 7, 8, 20]);
    }
}
