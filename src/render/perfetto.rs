//! A [`PerfettoExport`] as Chrome trace-event JSON (the JSON object format: `traceEvents`,
//! `displayTimeUnit`, `otherData`), which Perfetto UI and `chrome://tracing` open.
//!
//! Per device, one process (`pid` = the device index, named `GPU N` as a `torch.profiler`
//! trace names its GPU processes, so the two merge into one process when their events are
//! joined): counters `live (requested)`, `allocated` and `reserved` (`ph: "C"`, one argument
//! `bytes`), steps and annotations as complete events (`ph: "X"`) on threads of their own
//! (one per nesting lane), OOMs and segment changes as instant events (`ph: "i"`), and the
//! largest allocations as async spans (`ph: "b"`/`"e"`, category `allocation`) named by
//! their site. Threads use ids from [`TID_BASE`] on, clear of a profiler's stream ids.
//! Events are written one by one: the trace is never held as one JSON value.

use crate::analyze::export::perfetto::{DeviceTracks, PerfettoExport};
use serde_json::json;
use std::io::{Result, Write};

/// The first thread id memlens uses in a process.
pub const TID_BASE: u64 = 1_000_000;
/// Thread of the counters.
const TID_COUNTERS: u64 = TID_BASE;
/// Thread of the OOMs and segment changes.
const TID_EVENTS: u64 = TID_BASE + 1;
/// Thread of the largest allocations' async spans.
const TID_ALLOCATIONS: u64 = TID_BASE + 2;
/// First thread of the steps (one per lane).
const TID_STEPS: u64 = TID_BASE + 100;
/// First thread of the annotations (one per lane).
const TID_ANNOTATIONS: u64 = TID_BASE + 200;

/// The counter tracks: name, and which byte count of a point each shows.
pub const COUNTERS: [&str; 3] = ["live (requested)", "allocated", "reserved"];

/// Writes `export` as trace-event JSON.
pub fn write(out: &mut dyn Write, export: &PerfettoExport) -> Result<()> {
    let other = json!({
        "generator": export.generator,
        "schema_version": export.schema_version.to_string(),
        "time_basis": export.time_basis,
        "note": export.notes.join(" "),
    });
    writeln!(out, "{{\"displayTimeUnit\":\"ms\",\"otherData\":{other},")?;
    if export.base_ns != 0 {
        // As a profiler trace carries it: its `ts` count from this.
        writeln!(out, "\"baseTimeNanoseconds\":{},", export.base_ns)?;
    }
    out.write_all(b"\"traceEvents\":[")?;
    let mut w = Events { out, first: true };
    for d in &export.devices {
        device(&mut w, d)?;
    }
    out_end(w.out)
}

fn out_end(out: &mut dyn Write) -> Result<()> {
    out.write_all(b"\n]}\n")
}

/// Writes the events of an array, comma-separated, one a line.
struct Events<'w> {
    out: &'w mut dyn Write,
    first: bool,
}

impl Events<'_> {
    fn event(&mut self, v: serde_json::Value) -> Result<()> {
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        serde_json::to_writer(&mut *self.out, &v)?;
        Ok(())
    }

    fn thread_name(&mut self, pid: u32, tid: u64, name: &str) -> Result<()> {
        self.event(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                          "args": {"name": name}}),
        )
    }
}

fn device(w: &mut Events, d: &DeviceTracks) -> Result<()> {
    let pid = d.device;
    w.event(
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                   "args": {"name": format!("GPU {pid}")}}),
    )?;
    w.thread_name(pid, TID_COUNTERS, "memlens: memory")?;
    for p in &d.counters {
        let values = [p.live_requested_bytes, p.allocated_bytes, p.reserved_bytes];
        for (name, v) in COUNTERS.iter().zip(values) {
            w.event(json!({"ph": "C", "name": name, "cat": "memory", "pid": pid,
                           "tid": TID_COUNTERS, "ts": p.ts, "args": {"bytes": v}}))?;
        }
    }
    for (spans, tid0, what, cat) in [
        (&d.steps, TID_STEPS, "steps", "step"),
        (&d.annotations, TID_ANNOTATIONS, "annotations", "annotation"),
    ] {
        let lanes = spans.iter().map(|s| s.lane + 1).max().unwrap_or(0);
        for lane in 0..lanes {
            let name = if lane == 0 {
                format!("memlens: {what}")
            } else {
                format!("memlens: {what} ({})", lane + 1)
            };
            w.thread_name(pid, tid0 + lane as u64, &name)?;
        }
        for s in spans {
            w.event(json!({"ph": "X", "name": s.name, "cat": cat, "pid": pid,
                           "tid": tid0 + s.lane as u64, "ts": s.ts, "dur": s.dur,
                           "args": {"first_event": s.first_event, "last_event": s.last_event}}))?;
        }
    }
    if !d.instants.is_empty() {
        w.thread_name(pid, TID_EVENTS, "memlens: allocator events")?;
    }
    for i in &d.instants {
        let mut args = json!({"bytes": i.bytes, "event_index": i.event_index});
        if let Some(a) = i.address {
            args["address"] = json!(format!("0x{a:x}"));
        }
        if let Some(f) = i.device_free_bytes {
            args["device_free_bytes"] = json!(f);
        }
        // An OOM marks the whole process; a segment change its thread.
        let scope = if i.action == "oom" { "p" } else { "t" };
        w.event(
            json!({"ph": "i", "name": i.action, "cat": "allocator", "s": scope,
                       "pid": pid, "tid": TID_EVENTS, "ts": i.ts, "args": args}),
        )?;
    }
    if !d.allocations.is_empty() {
        w.thread_name(pid, TID_ALLOCATIONS, "memlens: largest allocations")?;
    }
    for a in &d.allocations {
        let id = format!("0x{:x}", ((pid as u64) << 40) | a.id);
        w.event(
            json!({"ph": "b", "name": a.site, "cat": "allocation", "id": id, "pid": pid,
                       "tid": TID_ALLOCATIONS, "ts": a.ts,
                       "args": {"bytes": a.bytes, "site": a.site,
                                "address": format!("0x{:x}", a.address),
                                "alloc_event": a.alloc_event, "free_event": a.free_event}}),
        )?;
        w.event(
            json!({"ph": "e", "name": a.site, "cat": "allocation", "id": id, "pid": pid,
                       "tid": TID_ALLOCATIONS, "ts": a.end_ts}),
        )?;
    }
    Ok(())
}
