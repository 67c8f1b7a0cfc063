//! Dict -> [`Frame`], stack, [`TraceEvent`], [`Block`], [`Segment`], [`Annotation`] and
//! allocator settings, with the typed field readers (`expect_*`) whose errors name the key.

use super::builder::Builder;
use super::kinds::*;
use crate::model::ids::{FrameId, FxId, StackId, StrId, StreamId, TagsId};
use crate::model::intern::{EventTags, Frame, FxNode};
use crate::model::keys::Key;
use crate::model::snapshot::*;
use crate::pickle::{Heap, ListData, ObjData, Value};

/// Typed readers of dict fields; errors name the key.
fn expect_u64(heap: &Heap, v: Value, key: &str) -> Result<u64, String> {
    match v {
        Value::Int(i) => Ok(i as u64),
        Value::UInt(u) => Ok(u),
        Value::Bool(b) => Ok(b as u64),
        // A whole number written as a float (`512.0`, `5e2`: JSON from tools that keep every
        // number as a double) is that integer when a double holds it exactly.
        Value::Float(f) if whole_float(f) => Ok(if f < 0.0 { f as i64 as u64 } else { f as u64 }),
        other => Err(format!(
            "key '{key}': expected an integer, found {}",
            other.type_name(heap)
        )),
    }
}

/// True for a float that is a whole number within the range of `i64` (negative) or `u64`:
/// exactly the integer the writer's double held.
fn whole_float(f: f64) -> bool {
    f.fract() == 0.0 && (-9.223_372_036_854_776e18..1.844_674_407_370_955_2e19).contains(&f)
}

fn expect_size(heap: &Heap, v: Value, key: &str) -> Result<u64, String> {
    match v {
        Value::Int(i) if i < 0 => Err(format!("key '{key}': expected a size, found {i}")),
        Value::Float(f) if f < 0.0 => Err(format!("key '{key}': expected a size, found {f}")),
        _ => expect_u64(heap, v, key),
    }
}

fn expect_i64(heap: &Heap, v: Value, key: &str) -> Result<i64, String> {
    match v {
        Value::Int(i) => Ok(i),
        Value::Float(f) if whole_float(f) && f < 9.223_372_036_854_776e18 => Ok(f as i64),
        Value::UInt(_) | Value::Huge(_) => Err(format!("key '{key}': integer out of range")),
        other => Err(format!(
            "key '{key}': expected an integer, found {}",
            other.type_name(heap)
        )),
    }
}

fn expect_str<'h>(heap: &'h Heap, v: Value, key: &str) -> Result<&'h [u8], String> {
    heap.str_bytes(v).ok_or_else(|| {
        format!(
            "key '{key}': expected a string, found {}",
            v.type_name(heap)
        )
    })
}

impl Builder<'_> {
    /// The id of stream handle `raw`: ids in order of first appearance, found through
    /// [`Builder::stream_index`].
    #[inline]
    pub(super) fn intern_stream(&mut self, raw: u64) -> Result<StreamId, String> {
        if self.last_stream.0 == raw {
            return Ok(self.last_stream.1);
        }
        self.intern_stream_new(raw)
    }

    #[inline(never)]
    fn intern_stream_new(&mut self, raw: u64) -> Result<StreamId, String> {
        if let Some(&id) = self.stream_index.get(&raw) {
            self.last_stream = (raw, id);
            return Ok(id);
        }
        if self.streams.len() > u16::MAX as usize {
            return Err(format!(
                "key 'stream': more than {} distinct streams in one trace; not a snapshot",
                u16::MAX as usize + 1
            ));
        }
        self.streams.push(raw);
        let id = StreamId(self.streams.len() as u16 - 1);
        self.stream_index.insert(raw, id);
        self.last_stream = (raw, id);
        Ok(id)
    }

    fn intern_text(&mut self, bytes: &[u8]) -> StrId {
        match std::str::from_utf8(bytes) {
            Ok(s) => self.strings.intern(s),
            Err(_) => self.strings.intern(&String::from_utf8_lossy(bytes)),
        }
    }

    /// Interns a per-event string, remembering the last one per slot: trace entries repeat
    /// the same `compile_context` (a fresh "N/A" object each) millions of times.
    #[inline]
    fn intern_cached(&mut self, bytes: &[u8], slot: usize) -> StrId {
        let (last, id) = &self.last_text[slot];
        // Short texts ("N/A", "") compared in line: a call to memcmp costs more than them.
        let same = last.len() == bytes.len()
            && if bytes.len() <= 16 {
                let mut i = 0;
                while i < bytes.len() && last[i] == bytes[i] {
                    i += 1;
                }
                i == bytes.len()
            } else {
                last.as_slice() == bytes
            };
        if same {
            return *id;
        }
        self.intern_cached_new(bytes, slot)
    }

    #[inline(never)]
    fn intern_cached_new(&mut self, bytes: &[u8], slot: usize) -> StrId {
        let id = self.intern_text(bytes);
        self.last_text[slot] = (bytes.to_vec(), id);
        id
    }

    /// Interns the string `v` (a frame's name or filename), through [`Builder::text_at`]
    /// when it lies in the input.
    fn intern_frame_text(&mut self, heap: &Heap, v: Value, key: &str) -> Result<StrId, String> {
        if let Value::Str { off, .. } = v {
            let slot = (off.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize
                & (super::builder::TEXT_AT_SLOTS - 1);
            let (at, id) = self.text_at[slot];
            if at == off {
                return Ok(id);
            }
            let id = self.intern_text(expect_str(heap, v, key)?);
            self.text_at[slot] = (off, id);
            return Ok(id);
        }
        Ok(self.intern_text(expect_str(heap, v, key)?))
    }

    pub(super) fn convert_frame(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<FrameId, String> {
        let mut frame = Frame {
            filename: StrId::EMPTY,
            name: StrId::EMPTY,
            line: -1,
            fx: FxId::NONE,
        };
        let mut fx = FxNode::default();
        for (k, v) in pairs {
            match heap.str_bytes(*k) {
                Some(b"filename") => {
                    frame.filename = self.intern_frame_text(heap, *v, "filename")?
                }
                Some(b"name") => frame.name = self.intern_frame_text(heap, *v, "name")?,
                Some(b"line") => {
                    frame.line = match *v {
                        Value::Int(i) if i >= 0 => i,
                        Value::Float(f) if whole_float(f) && (0.0..2e9).contains(&f) => f as i64,
                        Value::Int(_) | Value::UInt(_) | Value::Huge(_) | Value::None => -1,
                        other => {
                            return Err(format!(
                                "key 'line': expected an integer, found {}",
                                other.type_name(heap)
                            ))
                        }
                    }
                }
                // `augment_with_fx_traces=True` (rare): off the common keys' path.
                Some(key) if key.starts_with(b"fx_") => self.read_fx_key(heap, key, *v, &mut fx),
                _ => {}
            }
        }
        if fx != FxNode::default() {
            frame.fx = self.frames.intern_fx(fx);
        }
        Ok(self.frames.intern(frame))
    }

    /// An `fx_*` value of a frame: its text when a string, its repr's type otherwise
    /// (`fx_node_target` may be written from a non-string target); `None` is empty.
    /// One `fx_*` key of a frame into `fx`; other `fx_` keys are ignored.
    #[cold]
    #[inline(never)]
    fn read_fx_key(&mut self, heap: &Heap, key: &[u8], v: Value, fx: &mut FxNode) {
        let slot = match key {
            b"fx_node_op" => &mut fx.op,
            b"fx_node_name" => &mut fx.name,
            b"fx_node_target" => &mut fx.target,
            b"fx_original_trace" => &mut fx.original_trace,
            _ => return,
        };
        *slot = self.intern_fx_text(heap, v);
    }

    fn intern_fx_text(&mut self, heap: &Heap, v: Value) -> StrId {
        match heap.str_bytes(v) {
            Some(b) => self.intern_text(b),
            None if matches!(v, Value::None) => StrId::EMPTY,
            None => self.strings.intern(v.type_name(heap)),
        }
    }

    /// `forward_frames` (a list of traceback strings, or one string) → a stack, innermost
    /// first; a value with no readable frame is `StackId::ABSENT` (never an error: the key is
    /// informative, the entry stands without it).
    #[cold]
    #[inline(never)]
    fn convert_forward_frames(&mut self, heap: &Heap, v: Value) -> StackId {
        let mut texts: Vec<String> = Vec::new();
        if let Some(b) = heap.str_bytes(v) {
            texts.push(String::from_utf8_lossy(b).into_owned());
        } else if let Some(list) = heap.list(v) {
            for item in list.iter() {
                if let Some(b) = heap.str_bytes(heap.resolve(item)) {
                    texts.push(String::from_utf8_lossy(b).into_owned());
                }
            }
        }
        let mut ids = Vec::new();
        for text in &texts {
            for f in crate::model::traceback::frames(text) {
                let frame = Frame {
                    filename: self.strings.intern(f.filename),
                    name: self.strings.intern(f.name),
                    line: f.line,
                    fx: FxId::NONE,
                };
                ids.push(self.frames.intern(frame));
            }
        }
        if ids.is_empty() {
            return StackId::ABSENT;
        }
        // Written as a traceback (outermost first); stacks are innermost first.
        ids.reverse();
        self.stacks.intern(&ids)
    }

    /// `pool_id` of a trace entry: a pair of integers, as `segment_pool_id`.
    #[cold]
    #[inline(never)]
    fn read_pool_id(heap: &Heap, v: Value) -> Result<(u64, u64), String> {
        match heap.sequence(v).as_deref() {
            Some([a, b]) => Ok((
                expect_u64(heap, *a, "pool_id")?,
                expect_u64(heap, *b, "pool_id")?,
            )),
            _ => Err(format!(
                "key 'pool_id': expected a pair of integers, found {}",
                v.type_name(heap)
            )),
        }
    }

    /// A frames list → stack id (items already converted to frames when appended).
    pub(super) fn convert_stack(
        &mut self,
        heap: &Heap,
        v: Value,
        key: &str,
    ) -> Result<StackId, String> {
        match heap.resolve(v) {
            Value::Ext { kind: STACK, id } => Ok(StackId(id)),
            Value::None => Ok(StackId::ABSENT),
            Value::Obj(id) => {
                let ObjData::List(list) = heap.data(id) else {
                    return Err(format!(
                        "key '{key}': expected a list of frames, found {}",
                        v.type_name(heap)
                    ));
                };
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                // Fast path: every item already converted to a frame handle.
                let fast = list.as_slice().is_some_and(|items| {
                    items.iter().all(|v| match v {
                        Value::Ext { kind: FRAME, id } => {
                            scratch.push(FrameId(*id));
                            true
                        }
                        _ => false,
                    })
                });
                if !fast {
                    scratch.clear();
                    for item in list.iter() {
                        match heap.resolve(item) {
                            Value::Ext { kind: FRAME, id } => scratch.push(FrameId(id)),
                            other => match dict_pairs(heap, other) {
                                Some((_, pairs)) => scratch.push(self.convert_frame(heap, pairs)?),
                                None => {
                                    return Err(format!(
                                        "key '{key}': expected frame dicts in the list, found {}",
                                        other.type_name(heap)
                                    ))
                                }
                            },
                        }
                    }
                }
                let sid = self.stacks.intern(&scratch);
                self.scratch = scratch;
                Ok(sid)
            }
            other => Err(format!(
                "key '{key}': expected a list of frames, found {}",
                other.type_name(heap)
            )),
        }
    }

    pub(super) fn convert_event(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<TraceEvent, String> {
        let mut e = TraceEvent {
            addr: 0,
            size: 0,
            stream: StreamId::DEFAULT,
            time_us: NO_TIME,
            stack: StackId::ABSENT,
            tags: TagsId::NONE,
            action: Action::Other,
        };
        let mut tags = EventTags::default();
        let mut action = None;
        let mut device_free = None;
        for (k, v) in pairs {
            let v = *v;
            match self.keys.key(heap, *k) {
                Key::Action => {
                    let name = expect_str(heap, v, "action")?;
                    let a = self.keys.action(v, name);
                    if a == Action::Other {
                        *self
                            .unknown_actions
                            .entry(String::from_utf8_lossy(name).into_owned())
                            .or_default() += 1;
                    }
                    action = Some(a);
                }
                // The common case (an int) inline; the readers take everything else.
                Key::Addr => {
                    e.addr = match v {
                        Value::Int(i) => i as u64,
                        _ => expect_u64(heap, v, "addr")?,
                    }
                }
                Key::Size => {
                    e.size = match v {
                        Value::Int(i) if i >= 0 => i as u64,
                        _ => expect_size(heap, v, "size")?,
                    }
                }
                Key::Stream => {
                    let stream = match v {
                        Value::Int(i) => i as u64,
                        _ => expect_u64(heap, v, "stream")?,
                    };
                    e.stream = self.intern_stream(stream)?;
                }
                Key::TimeUs => {
                    e.time_us = match v {
                        Value::Int(i) => i,
                        _ => expect_i64(heap, v, "time_us")?,
                    }
                }
                Key::Frames => {
                    e.stack = match v {
                        // What the fast path hands over: the stack, converted.
                        Value::Ext { kind: STACK, id } => StackId(id),
                        _ => self.convert_stack(heap, v, "frames")?,
                    }
                }
                Key::DeviceFree => device_free = Some(expect_u64(heap, v, "device_free")?),
                Key::CompileContext => {
                    if let Some(s) = heap.str_bytes(v) {
                        tags.compile_context = self.intern_cached(s, 0);
                    }
                }
                Key::UserMetadata => {
                    if let Some(s) = heap.str_bytes(v) {
                        tags.user_metadata = self.intern_cached(s, 1);
                    }
                }
                Key::InternalMetadata => {
                    if let Some(s) = heap.str_bytes(v) {
                        tags.internal_metadata = self.intern_text(s);
                    }
                }
                Key::ForwardFrames => tags.forward_stack = self.convert_forward_frames(heap, v),
                Key::PoolId => tags.pool_id = Self::read_pool_id(heap, v)?,
                _ => {}
            }
        }
        e.action = action.ok_or("trace entry without key 'action'")?;
        e.tags = self.tags.intern(tags);
        if e.action == Action::Oom {
            if let Some(free) = device_free {
                e.addr = free;
            }
        }
        Ok(e)
    }

    pub(super) fn convert_block(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<Block, String> {
        let mut b = Block {
            address: 0,
            size: 0,
            requested_size: 0,
            state: BlockState::Inactive,
            stack: StackId::ABSENT,
            address_recorded: false,
        };
        let (mut size, mut state, mut requested) = (None, None, None);
        let mut history = None;
        for (k, v) in pairs {
            let v = *v;
            match heap.str_bytes(*k) {
                Some(b"size") => size = Some(expect_size(heap, v, "size")?),
                Some(b"requested_size") => requested = Some(expect_size(heap, v, "requested_size")?),
                Some(b"address") => {
                    b.address = expect_u64(heap, v, "address")?;
                    b.address_recorded = true;
                }
                Some(b"state") => {
                    state = Some(match expect_str(heap, v, "state")? {
                        b"active_allocated" => BlockState::ActiveAllocated,
                        b"active_pending_free" | b"active_awaiting_free" => BlockState::ActivePendingFree,
                        b"inactive" => BlockState::Inactive,
                        other => {
                            return Err(format!(
                                "key 'state': expected active_allocated, active_pending_free or inactive, found {:?}",
                                String::from_utf8_lossy(other)
                            ))
                        }
                    })
                }
                Some(b"frames") => b.stack = self.convert_stack(heap, v, "frames")?,
                Some(b"history") => history = Some(v),
                _ => {}
            }
        }
        b.size = size.ok_or("block without key 'size'")?;
        b.state = state.ok_or("block without key 'state'")?;
        if let Some(h) = history {
            // PyTorch 2.0: history[0] is the current allocation (snapshot-format.md §2).
            self.legacy_blocks += 1;
            let first = heap
                .list(h)
                .and_then(|l| (!l.is_empty()).then(|| l.get(0)))
                .and_then(|f| dict_pairs(heap, f));
            if let Some((_, pairs)) = first {
                for (k, v) in pairs {
                    match heap.str_bytes(*k) {
                        Some(b"real_size") if requested.is_none() => {
                            requested = Some(expect_size(heap, *v, "history[0].real_size")?)
                        }
                        Some(b"frames") if !b.stack.is_recorded() => {
                            b.stack = self.convert_stack(heap, *v, "history[0].frames")?
                        }
                        _ => {}
                    }
                }
            }
        }
        b.requested_size = requested.unwrap_or(b.size);
        Ok(b)
    }

    fn block_range(&mut self, heap: &Heap, v: Value) -> Result<std::ops::Range<u32>, String> {
        let list = heap
            .list(v)
            .ok_or_else(|| format!("key 'blocks': expected a list, found {}", v.type_name(heap)))?;
        if let ListData::Run {
            kind: BLOCK,
            start,
            len,
        } = list
        {
            return Ok(*start..start + len);
        }
        // Unusual layout: gather (or convert) the blocks into a fresh contiguous range.
        let mut gathered = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            match heap.resolve(item) {
                Value::Ext { kind: BLOCK, id } => gathered.push(self.blocks[id as usize]),
                other => match dict_pairs(heap, other) {
                    Some((_, pairs)) => gathered.push(
                        self.convert_block(heap, pairs)
                            .map_err(|e| format!("blocks[{i}]: {e}"))?,
                    ),
                    None => {
                        return Err(format!(
                            "blocks[{i}]: expected a block dict, found {}",
                            other.type_name(heap)
                        ))
                    }
                },
            }
        }
        let start = self.blocks.len() as u32;
        self.blocks.extend(gathered);
        Ok(start..self.blocks.len() as u32)
    }

    pub(super) fn convert_segment(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<Segment, String> {
        let mut s = Segment {
            device: 0,
            address: 0,
            total_size: 0,
            recorded_allocated: None,
            recorded_active: None,
            recorded_requested: None,
            stream: 0,
            pool: PoolKind::Unknown,
            pool_id: (0, 0),
            expandable: false,
            stack: StackId::ABSENT,
            blocks: 0..0,
        };
        let mut total = None;
        let mut blocks = None;
        for (k, v) in pairs {
            let v = *v;
            match heap.str_bytes(*k) {
                Some(b"device") => {
                    let d = expect_i64(heap, v, "device")?;
                    // -1 (the CPU) is pinned host memory's; `assemble` refuses it on a
                    // device segment.
                    s.device = if d == -1 {
                        HOST_DEVICE
                    } else {
                        u32::try_from(d)
                            .ok()
                            .filter(|&d| d != HOST_DEVICE)
                            .ok_or_else(|| {
                                format!("key 'device': expected a device index, found {d}")
                            })?
                    };
                }
                Some(b"address") => s.address = expect_u64(heap, v, "address")?,
                Some(b"total_size") => total = Some(expect_size(heap, v, "total_size")?),
                Some(b"allocated_size") => {
                    s.recorded_allocated = Some(expect_size(heap, v, "allocated_size")?)
                }
                Some(b"active_size") => {
                    s.recorded_active = Some(expect_size(heap, v, "active_size")?)
                }
                Some(b"requested_size") => {
                    s.recorded_requested = Some(expect_size(heap, v, "requested_size")?)
                }
                Some(b"stream") => s.stream = expect_u64(heap, v, "stream")?,
                Some(b"segment_type") => {
                    s.pool = match expect_str(heap, v, "segment_type")? {
                        b"small" => PoolKind::Small,
                        b"large" => PoolKind::Large,
                        _ => PoolKind::Unknown,
                    }
                }
                Some(b"segment_pool_id") => {
                    let items = heap.sequence(v).unwrap_or_default();
                    if items.len() != 2 {
                        return Err(format!(
                            "key 'segment_pool_id': expected a pair of integers, found {}",
                            v.type_name(heap)
                        ));
                    }
                    s.pool_id = (
                        expect_u64(heap, items[0], "segment_pool_id")?,
                        expect_u64(heap, items[1], "segment_pool_id")?,
                    );
                }
                Some(b"is_expandable") => {
                    s.expandable = matches!(v, Value::Bool(true) | Value::Int(1))
                }
                Some(b"frames") => s.stack = self.convert_stack(heap, v, "frames")?,
                Some(b"blocks") => blocks = Some(v),
                _ => {}
            }
        }
        s.total_size = total.ok_or("segment without key 'total_size'")?;
        let range = match blocks {
            Some(v) => self.block_range(heap, v)?,
            None => return Err("segment without key 'blocks'".into()),
        };
        // Addresses absent (2.0, profiler-derived): the running sum from the segment base.
        let mut addr = s.address;
        for b in &mut self.blocks[range.start as usize..range.end as usize] {
            if !b.address_recorded {
                b.address = addr;
            }
            addr = b.address.wrapping_add(b.size);
        }
        s.blocks = range;
        Ok(s)
    }

    pub(super) fn convert_annotation(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<Annotation, String> {
        let mut a = Annotation {
            device: None,
            name: String::new(),
            stage: String::new(),
            time_us: None,
        };
        for (k, v) in pairs {
            match heap.str_bytes(*k) {
                Some(b"name") => a.name = heap.text(*v).map(|c| c.into_owned()).unwrap_or_default(),
                Some(b"stage") => {
                    a.stage = heap.text(*v).map(|c| c.into_owned()).unwrap_or_default()
                }
                Some(b"device") => a.device = expect_i64(heap, *v, "device").ok(),
                Some(b"time_us") => a.time_us = expect_i64(heap, *v, "time_us").ok(),
                _ => {}
            }
        }
        Ok(a)
    }

    pub(super) fn settings(&self, heap: &Heap, v: Value) -> Option<Vec<(String, SettingValue)>> {
        let (_, pairs) = dict_pairs(heap, v)?;
        Some(
            pairs
                .iter()
                .map(|(k, v)| {
                    let key = heap
                        .text(*k)
                        .map(|c| c.into_owned())
                        .unwrap_or_else(|| "?".into());
                    (key, self.setting_value(heap, *v, 0))
                })
                .collect(),
        )
    }

    fn setting_value(&self, heap: &Heap, v: Value, depth: u32) -> SettingValue {
        match heap.resolve(v) {
            Value::Bool(b) => SettingValue::Bool(b),
            Value::Int(i) => SettingValue::Int(i),
            Value::UInt(u) => SettingValue::UInt(u),
            Value::Float(f) => SettingValue::Float(f),
            Value::Str { .. } | Value::Owned(_) => {
                SettingValue::Text(heap.text(v).unwrap().into_owned())
            }
            other => match dict_pairs(heap, other) {
                Some((_, pairs)) if depth < 4 => SettingValue::Map(
                    pairs
                        .iter()
                        .map(|(k, v)| {
                            (
                                heap.text(*k)
                                    .map(|c| c.into_owned())
                                    .unwrap_or_else(|| "?".into()),
                                self.setting_value(heap, *v, depth + 1),
                            )
                        })
                        .collect(),
                ),
                _ => SettingValue::Other(other.type_name(heap).to_string()),
            },
        }
    }
}
