//! The top level of a decoded pickle -> [`Snapshot`]: the lists of converted handles are
//! collected (stragglers converted with key-path errors), then segments, events, devices and
//! annotations are put in order, totals bounded and the snapshot validated.

use super::builder::Builder;
use super::kinds::*;
use crate::model::error::BuildError;
use crate::model::snapshot::*;
use crate::model::{bounds, validate};
use crate::pickle::{Heap, ListData, ObjData, Value};

/// Where `host_segments` and `host_traces` put their converted records.
#[derive(Default)]
struct Host {
    segments: Option<Vec<u32>>,
    trace: Option<Vec<u32>>,
}

fn shape<T>(path: impl Into<String>, message: impl Into<String>) -> Result<T, BuildError> {
    Err(BuildError::Shape {
        path: path.into(),
        message: message.into(),
    })
}

impl Builder<'_> {
    /// Items of a list of converted `kind` handles, converting stragglers (path-named errors).
    fn collect_ids(
        &mut self,
        heap: &Heap,
        v: Value,
        kind: u8,
        path: &str,
    ) -> Result<Vec<u32>, BuildError> {
        let Some(list) = heap.list(v) else {
            return shape(
                path,
                format!("expected a list, found {}", v.type_name(heap)),
            );
        };
        if let ListData::Run {
            kind: k,
            start,
            len,
        } = list
        {
            if *k == kind {
                return Ok((*start..start + len).collect());
            }
        }
        let mut ids = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let item = heap.resolve(item);
            if let Value::Ext { kind: k, id } = item {
                if k == kind {
                    ids.push(id);
                    continue;
                }
            }
            let p = format!("{path}[{i}]");
            let Some((_, pairs)) = dict_pairs(heap, item) else {
                return shape(
                    p,
                    format!("expected a dict, found {}", item.type_name(heap)),
                );
            };
            let id = match kind {
                EVENT => {
                    let e = self
                        .convert_event(heap, pairs)
                        .map_err(|m| BuildError::Shape {
                            path: p,
                            message: m,
                        })?;
                    self.events.push(e);
                    self.events.len() - 1
                }
                SEGMENT => {
                    let s = self
                        .convert_segment(heap, pairs)
                        .map_err(|m| BuildError::Shape {
                            path: p,
                            message: m,
                        })?;
                    self.segments.push(s);
                    self.segments.len() - 1
                }
                _ => {
                    let a =
                        self.convert_annotation(heap, pairs)
                            .map_err(|m| BuildError::Shape {
                                path: p,
                                message: m,
                            })?;
                    self.annotations.push(a);
                    self.annotations.len() - 1
                }
            };
            ids.push(id as u32);
        }
        Ok(ids)
    }

    /// The trace entries of `host_traces`: one list of entries, or a list of such lists
    /// (joined in order).
    fn collect_host_trace(&mut self, heap: &Heap, v: Value) -> Result<Vec<u32>, BuildError> {
        let nested = heap.list(v).is_some_and(|l| {
            l.iter()
                .next()
                .is_some_and(|first| heap.list(heap.resolve(first)).is_some())
        });
        if !nested {
            return self.collect_ids(heap, v, EVENT, "host_traces");
        }
        let items: Vec<Value> = heap.list(v).map(|l| l.iter().collect()).unwrap_or_default();
        let mut ids = Vec::new();
        for (i, t) in items.into_iter().enumerate() {
            let t = heap.resolve(t);
            if t == Value::None {
                continue;
            }
            ids.extend(self.collect_ids(heap, t, EVENT, &format!("host_traces[{i}]"))?);
        }
        Ok(ids)
    }

    pub(super) fn finish(mut self, heap: &Heap, top: Value) -> Result<Snapshot, BuildError> {
        let mut traces: Vec<Option<Vec<u32>>> = Vec::new();
        let mut settings = None;
        let mut annotation_ids = Vec::new();
        let mut host = Host::default();
        let layout;
        let segment_ids = match heap.resolve(top) {
            Value::Obj(id) if matches!(heap.data(id), ObjData::List(_)) => {
                layout = Layout::SegmentList;
                self.collect_ids(heap, top, SEGMENT, "[top-level list]")?
            }
            Value::Obj(id) if matches!(heap.data(id), ObjData::Dict(_)) => {
                layout = Layout::Modern;
                let mut seg_ids = Vec::new();
                if let Some(v) = heap.get(top, "segments") {
                    seg_ids = self.collect_ids(heap, v, SEGMENT, "segments")?;
                }
                if let Some(v) = heap.get(top, "device_traces") {
                    let Some(list) = heap.list(v) else {
                        return shape(
                            "device_traces",
                            format!("expected a list of lists, found {}", v.type_name(heap)),
                        );
                    };
                    let items: Vec<Value> = list.iter().collect();
                    for (d, t) in items.into_iter().enumerate() {
                        let t = heap.resolve(t);
                        if t == Value::None {
                            traces.push(None);
                            continue;
                        }
                        traces.push(Some(self.collect_ids(
                            heap,
                            t,
                            EVENT,
                            &format!("device_traces[{d}]"),
                        )?));
                    }
                }
                if let Some(v) = heap.get(top, "allocator_settings") {
                    settings = self.settings(heap, v);
                }
                if let Some(v) = heap.get(top, "external_annotations") {
                    annotation_ids =
                        self.collect_ids(heap, v, ANNOTATION, "external_annotations")?;
                }
                // Pinned host memory (PyTorch 2.14+): segments and trace entries shaped like
                // the device allocator's, kept apart.
                if let Some(v) = heap.get(top, "host_segments") {
                    host.segments = Some(self.collect_ids(heap, v, SEGMENT, "host_segments")?);
                }
                if let Some(v) = heap.get(top, "host_traces") {
                    host.trace = Some(self.collect_host_trace(heap, v)?);
                }
                seg_ids
            }
            other => {
                return shape(
                    "[top level]",
                    format!(
                        "expected a snapshot dict or a list of segments, found {}",
                        other.type_name(heap)
                    ),
                )
            }
        };
        let layout = if self.legacy_blocks > 0 && layout == Layout::Modern {
            Layout::Legacy
        } else {
            layout
        };
        self.assemble(layout, segment_ids, traces, settings, annotation_ids, host)
    }

    fn assemble(
        mut self,
        layout: Layout,
        segment_ids: Vec<u32>,
        traces: Vec<Option<Vec<u32>>>,
        settings: Option<Vec<(String, SettingValue)>>,
        annotation_ids: Vec<u32>,
        host_ids: Host,
    ) -> Result<Snapshot, BuildError> {
        let mut warnings = Vec::new();
        // Pinned host memory: its segments and entries copied out (few, and apart from every
        // device's), before the device lists may take the builder's vectors.
        let host = (host_ids.segments.is_some() || host_ids.trace.is_some()).then(|| HostMemory {
            segments: host_ids
                .segments
                .iter()
                .flatten()
                .map(|&i| self.segments[i as usize].clone())
                .collect(),
            events: host_ids
                .trace
                .iter()
                .flatten()
                .map(|&i| self.events[i as usize])
                .collect(),
            segments_recorded: host_ids.segments.is_some(),
            trace_recorded: host_ids.trace.is_some(),
        });
        let host_events = host_ids.trace.as_ref().map_or(0, Vec::len);
        // Segments: those the top level lists, sorted by (device, address) (I9).
        let mut segments: Vec<Segment> = if segment_ids.len() == self.segments.len()
            && segment_ids
                .iter()
                .enumerate()
                .all(|(i, &id)| id as usize == i)
        {
            std::mem::take(&mut self.segments)
        } else {
            segment_ids
                .iter()
                .map(|&i| self.segments[i as usize].clone())
                .collect()
        };
        // A segment without blocks gets one spelling of its empty range, whichever decoder
        // (and chunking) built it.
        for seg in segments.iter_mut().filter(|s| s.blocks.is_empty()) {
            seg.blocks = 0..0;
        }
        // -1 is the CPU's device index: a segment of pinned host memory, never of a device.
        if let Some(i) = segments.iter().position(|s| s.device == HOST_DEVICE) {
            let path = match layout {
                Layout::SegmentList => format!("[{i}]"),
                Layout::Modern | Layout::Legacy => format!("segments[{i}]"),
            };
            return shape(path, "key 'device': expected a device index, found -1");
        }
        // No total may wrap: sizes are added up (and their keys named) in file order.
        let mut sizes = bounds::SizeTotal::default();
        sizes.add_segments(layout, &segments, &self.blocks)?;
        let sorted = segments
            .windows(2)
            .all(|w| (w[0].device, w[0].address) <= (w[1].device, w[1].address));
        if !sorted {
            warnings.push(Warning {
                code: "segments_unsorted",
                device: None,
                message: "segments are not sorted by device and address as PyTorch writes them; sorted here".into(),
            });
            segments.sort_by_key(|s| (s.device, s.address));
        }

        let (events, trace_ranges) = self.trace_events(&traces, host_events);

        sizes.add_traces(&events, &trace_ranges)?;
        if let Some(h) = &host {
            sizes.add_host(&h.segments, &self.blocks, &h.events)?;
        }

        let devices = devices(&segments, &trace_ranges);

        let annotations = if annotation_ids
            .iter()
            .enumerate()
            .all(|(i, &id)| id as usize == i)
            && annotation_ids.len() == self.annotations.len()
        {
            std::mem::take(&mut self.annotations)
        } else {
            annotation_ids
                .iter()
                .map(|&i| self.annotations[i as usize].clone())
                .collect()
        };

        for (name, n) in &self.unknown_actions {
            warnings.push(Warning {
                code: "unknown_action",
                device: None,
                message: format!("{n} trace entries have the unknown action {name:?}; they are kept but not interpreted"),
            });
        }

        let mut snap = Snapshot {
            layout,
            strings: self.strings,
            frames: self.frames,
            stacks: self.stacks,
            segments,
            blocks: self.blocks,
            events,
            streams: std::mem::take(&mut self.streams),
            devices,
            allocator_settings: settings,
            annotations,
            host,
            warnings,
            tags: self.tags,
            unknown_actions: std::mem::take(&mut self.unknown_actions)
                .into_iter()
                .collect(),
            fx_stacks: Vec::new(),
            forward_marker: None,
            recorded_stacks: Default::default(),
            recorded_distinct: (0, 0),
        };
        snap.recorded_distinct = (snap.frames.len(), snap.stacks.len());
        super::joined::join(&mut snap);
        // Vectors grown by doubling give back their unused tail (a shrinking realloc of a
        // large block remaps pages; nothing is copied).
        snap.events.shrink_to_fit();
        snap.blocks.shrink_to_fit();
        snap.segments.shrink_to_fit();
        let found = validate::check(&snap);
        snap.warnings.extend(found);
        Ok(snap)
    }

    /// The trace entries of every device's list, as one array with a range per device (`None`:
    /// no list): the builder's own array when the lists hold its entries in order (host
    /// entries, when they come last, are left behind it: they were copied out before).
    fn trace_events(
        &mut self,
        traces: &[Option<Vec<u32>>],
        host_events: usize,
    ) -> (Vec<TraceEvent>, Vec<Option<std::ops::Range<usize>>>) {
        let contiguous = {
            let mut next = 0u32;
            traces.iter().flatten().all(|ids| {
                ids.iter().all(|&id| {
                    let ok = id == next;
                    next += 1;
                    ok
                })
            }) && next as usize + host_events == self.events.len()
        };
        let mut events = Vec::new();
        let mut trace_ranges = Vec::with_capacity(traces.len());
        if contiguous {
            let mut start = 0;
            for t in traces {
                let n = t.as_ref().map_or(0, |ids| ids.len());
                trace_ranges.push(t.as_ref().map(|_| start..start + n));
                start += n;
            }
            events = std::mem::take(&mut self.events);
            events.truncate(start);
        } else {
            for t in traces {
                let start = events.len();
                if let Some(ids) = t {
                    events.extend(ids.iter().map(|&i| self.events[i as usize]));
                }
                trace_ranges.push(t.as_ref().map(|_| start..events.len()));
            }
        }
        (events, trace_ranges)
    }
}

/// Devices: any with segments (sorted by device) or a non-empty trace.
fn devices(segments: &[Segment], trace_ranges: &[Option<std::ops::Range<usize>>]) -> Vec<Device> {
    let mut ids: Vec<u32> = segments.iter().map(|s| s.device).collect();
    for (d, r) in trace_ranges.iter().enumerate() {
        if r.as_ref().is_some_and(|r| !r.is_empty()) {
            ids.push(d as u32);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    // A device without a trace list gets an empty range where its trace would start, so
    // the devices' ranges stay contiguous and in order (segments only on device 235 of a
    // file with one trace list: 85..85, not 0..0).
    let mut at = 0;
    ids.into_iter()
        .map(|id| {
            let lo = segments.partition_point(|s| s.device < id);
            let hi = segments.partition_point(|s| s.device <= id);
            let tr = trace_ranges.get(id as usize).cloned().flatten();
            let trace = tr.clone().unwrap_or(at..at);
            at = trace.end;
            Device {
                id,
                segments: lo..hi,
                trace_recorded: tr.is_some(),
                trace,
            }
        })
        .collect()
}
