//! Replay on hand-built event sequences (GIVEN / WHEN / THEN).

use super::*;
use crate::input::json_to_pickle;
use crate::model::build;

fn snap(json: &str) -> Snapshot {
    build(
        &json_to_pickle(json.as_bytes()).unwrap(),
        Default::default(),
    )
    .unwrap()
}

fn ev(action: &str, addr: u64, size: u64) -> String {
    format!(
        r#"{{"action": "{action}", "addr": {addr}, "size": {size}, "stream": 0, "time_us": {}}}"#,
        1000 + addr
    )
}

#[test]
fn alloc_free_pairs_give_the_live_curve_and_peak() {
    // GIVEN two overlapping allocations, then both freed
    let trace = [
        ev("alloc", 1, 100),
        ev("alloc", 2, 50),
        ev("free_requested", 1, 100),
        ev("free_completed", 1, 100),
        ev("free_requested", 2, 50),
        ev("free_completed", 2, 50),
    ]
    .join(",");
    let s = snap(&format!(
        r#"{{"segments": [], "device_traces": [[{trace}]]}}"#
    ));
    // WHEN replayed
    let r = replay(&s);
    // THEN the curve counts pending frees until free_completed, and the peak is the first max
    assert_eq!(r[0].live, vec![100, 150, 150, 50, 50, 0]);
    assert_eq!(r[0].peak, 1);
    assert_eq!(r[0].peak_bytes, 150);
    assert_eq!(r[0].initial_bytes, 0);
}

#[test]
fn orphan_frees_and_unexplained_final_blocks_count_from_the_start() {
    // GIVEN a trace that starts with the free of an allocation made before it, and a final
    // live block the trace never allocated
    let trace = [
        ev("free_requested", 7, 300),
        ev("free_completed", 7, 300),
        ev("alloc", 8, 10),
    ]
    .join(",");
    let segs = r#"[{"device": 0, "address": 0, "total_size": 2097152, "segment_type": "small",
        "blocks": [{"address": 0, "size": 1024, "requested_size": 1000, "state": "active_allocated"},
                   {"address": 8, "size": 512, "requested_size": 10, "state": "active_allocated"},
                   {"address": 1536, "size": 2095616, "requested_size": 0, "state": "inactive"}]}]"#;
    let s = snap(&format!(
        r#"{{"segments": {segs}, "device_traces": [[{trace}]]}}"#
    ));
    let r = &replay(&s)[0];
    // THEN initial = orphan 300 + unexplained block 1000; the block at 8 is the trace's alloc
    assert_eq!(r.initial_bytes, 1300);
    assert_eq!(r.live, vec![1300, 1000, 1010]);
    assert_eq!(r.peak, -1);
    assert_eq!(r.peak_bytes, 1300);
    let origins: Vec<Origin> = r.allocations.iter().map(|a| a.origin).collect();
    assert_eq!(
        origins,
        vec![Origin::OrphanFree, Origin::FinalBlock, Origin::Trace]
    );
    assert_eq!(r.unconfirmed_at_end, 0);
}

#[test]
fn reserved_is_replayed_backwards_from_the_final_segments() {
    let trace = [
        ev("segment_alloc", 0, 2097152),
        ev("alloc", 0, 10),
        ev("segment_map", 4194304, 20971520),
        ev("segment_unmap", 4194304, 20971520),
    ]
    .join(",");
    let segs = r#"[{"device": 0, "address": 0, "total_size": 2097152, "segment_type": "small",
        "blocks": [{"address": 0, "size": 512, "requested_size": 10, "state": "active_allocated"},
                   {"address": 512, "size": 2096640, "requested_size": 0, "state": "inactive"}]}]"#;
    let s = snap(&format!(
        r#"{{"segments": {segs}, "device_traces": [[{trace}]]}}"#
    ));
    let r = &replay(&s)[0];
    assert_eq!(r.initial_reserved, 0);
    assert_eq!(r.reserved, vec![2097152, 2097152, 23068672, 2097152]);
    assert!(!r.reserved_incomplete);
}

#[test]
fn moments_resolve() {
    let trace = [
        ev("alloc", 1, 100),
        ev("oom", 0, 4096),
        ev("free_completed", 1, 100),
    ]
    .join(",");
    let s = snap(&format!(r#"{{"device_traces": [[{trace}]]}}"#));
    let r = &replay(&s)[0];
    let t = s.device_trace(&s.devices[0]);
    use MomentSpec::*;
    assert_eq!(resolve(Peak, r, t), Ok(0));
    assert_eq!(resolve(End, r, t), Ok(2));
    assert_eq!(resolve(Start, r, t), Ok(-1));
    assert_eq!(resolve(Oom(1), r, t), Ok(1));
    assert!(resolve(Oom(2), r, t).is_err());
    assert_eq!(resolve(Index(2), r, t), Ok(2));
    assert!(resolve(Index(3), r, t).is_err());
    // time_us of the events are 1001, 1000, 1001: the scan stops at the first later time.
    assert_eq!(resolve(Time(1000), r, t), Ok(-1));
    assert_eq!(resolve(Time(1001), r, t), Ok(2));
    assert_eq!("peak".parse::<MomentSpec>(), Ok(Peak));
    assert_eq!("oom:3".parse::<MomentSpec>(), Ok(Oom(3)));
    assert_eq!("42".parse::<MomentSpec>(), Ok(Index(42)));
    assert_eq!(
        "1732950000000000".parse::<MomentSpec>(),
        Ok(Time(1732950000000000))
    );
    assert_eq!("t:5".parse::<MomentSpec>(), Ok(Time(5)));
    assert!("soon".parse::<MomentSpec>().is_err());
    let w: WindowSpec = "3:".parse().unwrap();
    assert_eq!(
        w,
        WindowSpec {
            from: Some(Index(3)),
            to: None,
            ..WindowSpec::default()
        }
    );
    assert_eq!(
        resolve_window(&":1".parse().unwrap(), r, t),
        Ok(Window { first: -1, last: 1 })
    );
    assert!(resolve_window(&"2:1".parse().unwrap(), r, t).is_err());
}

#[test]
fn round_size_follows_the_allocator() {
    assert_eq!(round_size(1), 512);
    assert_eq!(round_size(512), 512);
    assert_eq!(round_size(513), 1024);
    assert_eq!(round_size(1 << 20), 1 << 20);
}

/// A trace event with a two-frame stack `(file, line, name)` innermost first.
fn ev_at(action: &str, addr: u64, size: u64, frames: &[(&str, u32, &str)]) -> String {
    let frames: Vec<String> = frames
        .iter()
        .map(|(f, l, n)| format!(r#"{{"filename": "{f}", "line": {l}, "name": "{n}"}}"#))
        .collect();
    format!(
        r#"{{"action": "{action}", "addr": {addr}, "size": {size}, "stream": 0, "frames": [{}]}}"#,
        frames.join(",")
    )
}

/// A loop body: set-up allocations once, then `n` iterations of (x, h, free h, free x?).
fn loop_trace(n: u64, frees: bool, outer: (&str, u32, &str)) -> Snapshot {
    let mut t = vec![
        ev_at("alloc", 1, 4096, &[("/u/run.py", 5, "init"), outer]),
        ev_at("alloc", 2, 4096, &[("/u/run.py", 6, "init"), outer]),
    ];
    for k in 0..n {
        let (x, h) = (100 + 2 * k, 101 + 2 * k);
        t.push(ev_at("alloc", x, 512, &[("/u/run.py", 10, "step"), outer]));
        t.push(ev_at("alloc", h, 1024, &[("/u/run.py", 11, "step"), outer]));
        t.push(ev_at(
            "alloc",
            900 + k,
            64,
            &[("/u/run.py", 12, "step"), outer],
        ));
        if frees {
            t.push(ev_at("free_requested", h, 1024, &[outer]));
            t.push(ev_at("free_completed", h, 1024, &[outer]));
        } else {
            t.push(ev_at(
                "alloc",
                800 + k,
                8,
                &[("/u/run.py", 13, "step"), outer],
            ));
        }
    }
    snap(&format!(
        r#"{{"segments": [], "device_traces": [[{}]]}}"#,
        t.join(",")
    ))
}

#[test]
fn a_loop_without_markers_is_found_by_its_first_repeating_allocation() {
    // GIVEN 6 iterations that each allocate x, h and a kept tensor, and free h, after set-up
    let s = loop_trace(6, true, ("/u/run.py", 30, "main"));
    let r = replay(&s);
    // WHEN the steps are looked for
    let st = steps::find(&s, &r[0]);
    // THEN the loop's first allocation (event 2, x) starts each of the 6 steps
    assert_eq!(st.source, Some(steps::StepSource::Periodic));
    assert_eq!(st.marker.as_deref(), Some("stack of event 2"));
    assert_eq!(st.steps.len(), 6);
    assert_eq!(
        st.steps.iter().map(|s| s.first_event).collect::<Vec<_>>(),
        vec![2, 7, 12, 17, 22, 27]
    );
    assert_eq!(st.steps[5].last_event, 31);
}

#[test]
fn a_loop_that_frees_nothing_or_runs_inside_a_forward_is_not_a_step() {
    // GIVEN the same loop without frees (building layers), and one inside a module's forward
    for s in [
        loop_trace(6, false, ("/u/run.py", 30, "main")),
        loop_trace(6, true, ("/u/model.py", 30, "forward")),
    ] {
        let r = replay(&s);
        // WHEN the steps are looked for THEN none are found
        let st = steps::find(&s, &r[0]);
        assert_eq!(st.source, None, "{:?}", st.steps);
        assert!(st.steps.is_empty());
    }
}

/// `step:N` and times since the first event parse to their own moments; bad ones are errors.
#[test]
fn step_and_time_since_start_moments_parse() {
    let p = |s: &str| s.parse::<MomentSpec>();
    assert_eq!(p("step:2"), Ok(MomentSpec::Step(2)));
    assert_eq!(p("time:12.5s"), Ok(MomentSpec::Since(12_500_000)));
    assert_eq!(p("time:300ms"), Ok(MomentSpec::Since(300_000)));
    assert_eq!(p("time:7us"), Ok(MomentSpec::Since(7)));
    assert_eq!(
        p("time:1732950000000133"),
        Ok(MomentSpec::Time(1732950000000133))
    );
    for bad in ["step:0", "step:x", "time:-1s", "time:nans", "time:1e30s"] {
        assert!(p(bad).is_err(), "{bad}");
    }
    assert_eq!(MomentSpec::Since(12_500_000).to_string(), "time:12.5s");
    assert_eq!(MomentSpec::Step(3).to_string(), "step:3");
}
