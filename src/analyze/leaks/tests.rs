//! Unit tests of `leaks` on small traces written as JSON.

use super::*;
use crate::input::json_to_pickle;
use crate::model::build;
use crate::vocab::absence::JudgementState;

/// A loop of 6 ProfilerSteps keeping, per step, one tensor of a module's forward at
/// train.py:20 and one tensor made directly at train.py:21, the line's first when `leak_first`.
fn two_lines(leak_first: bool) -> LeaksReport {
    let graph = r#"[{"name": "forward", "filename": "/u/model.py", "line": 5}, {"name": "main", "filename": "/u/train.py", "line": 20}]"#;
    let line = r#"[{"name": "main", "filename": "/u/train.py", "line": 21}]"#;
    let (mut trace, mut ann) = (Vec::new(), Vec::new());
    for step in 0..6u64 {
        let t0 = 1000 * step;
        ann.push(format!(
            r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
        ));
        let mut t = t0;
        let mut alloc = |addr: u64, frames: &str, trace: &mut Vec<String>| {
            t += 1;
            trace.push(format!(r#"{{"action": "alloc", "addr": {addr}, "size": 1048576, "stream": 0, "time_us": {t}, "frames": {frames}}}"#));
        };
        let base = (step + 1) << 24;
        let order = if leak_first {
            [(base, line), (base | 1 << 20, graph)]
        } else {
            [(base, graph), (base | 1 << 20, line)]
        };
        for (addr, frames) in order {
            alloc(addr, frames, &mut trace);
        }
        // a temporary of the forward, freed within the step
        alloc(base | 2 << 20, graph, &mut trace);
        trace.push(format!(r#"{{"action": "free_completed", "addr": {}, "size": 1048576, "stream": 0, "time_us": {}}}"#, base | 2 << 20, t0 + 8));
        ann.push(format!(
            r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
            t0 + 9
        ));
    }
    leaks_of(&trace, &ann)
}

/// `leaks` with the default options on device 0's `trace` entries and the
/// `external_annotations` `ann` (JSON objects as text).
fn leaks_of(trace: &[String], ann: &[String]) -> LeaksReport {
    let json = format!(
        r#"{{"device_traces": [[{}]], "external_annotations": [{}]}}"#,
        trace.join(","),
        ann.join(",")
    );
    let snap = build(
        &json_to_pickle(json.as_bytes()).unwrap(),
        Default::default(),
    )
    .unwrap();
    let replays = crate::replay::replay(&snap);
    run(&snap, &replays, &LeaksOptions::default())
}

/// GIVEN a tensor kept at a loop line just before a retained graph's forward, WHEN leaks
/// runs, THEN it is that graph's input: one finding. GIVEN it is kept after the forward
/// (a list of outputs), THEN it is a leak of its own: two findings.
#[test]
fn a_kept_tensor_joins_the_graph_only_as_its_input() {
    let r = two_lines(true);
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.kind, "retained_graph");
    // the line to change is the graph's own (its input does not move it)
    assert_eq!(f.site, "/u/model.py:5:forward");
    assert_eq!(f.bytes_per_step, 2 << 20);
    assert_eq!(f.tensors_per_step, 2.0);
    let roles: Vec<(&str, &str)> = f.sites.iter().map(|s| (s.site.as_str(), s.role)).collect();
    assert!(
        roles.contains(&("/u/train.py:21:main", "input")),
        "{roles:?}"
    );
    assert!(
        roles.contains(&("/u/model.py:5:forward", "saved")),
        "{roles:?}"
    );
    let r = two_lines(false);
    let kinds: Vec<(&str, &str)> = r
        .findings
        .iter()
        .map(|f| (f.kind, f.site.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("retained_graph", "/u/model.py:5:forward"),
            ("leak", "/u/train.py:21:main")
        ]
    );
}

/// A loop of 6 ProfilerSteps making, each step, the tensors `made` (frames as JSON text,
/// innermost first; size; whether the step frees it), in order, after a retained graph's
/// forward pass at train.py:20 (a 1 MiB activation of model.py:5 kept, a temporary freed).
fn after_a_graph(made: &[(&str, u64, bool)]) -> LeaksReport {
    let graph = r#"[{"name": "forward", "filename": "/u/model.py", "line": 5}, {"name": "_call_impl", "filename": "/e/site-packages/torch/nn/modules/module.py", "line": 1747}, {"name": "main", "filename": "/u/train.py", "line": 20}]"#;
    let (mut trace, mut ann) = (Vec::new(), Vec::new());
    for step in 0..6u64 {
        let t0 = 1000 * step;
        ann.push(format!(
            r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
        ));
        let mut t = t0;
        let base = (step + 1) << 28;
        let mut freed = Vec::new();
        let all = [(graph, 1 << 20, false), (graph, 1 << 20, true)];
        for (i, &(frames, size, free)) in all.iter().chain(made).enumerate() {
            t += 1;
            let addr = base | (i as u64) << 22;
            trace.push(format!(r#"{{"action": "alloc", "addr": {addr}, "size": {size}, "stream": 0, "time_us": {t}, "frames": {frames}}}"#));
            if free {
                freed.push((addr, size));
            }
        }
        for (addr, size) in freed {
            t += 1;
            trace.push(format!(r#"{{"action": "free_completed", "addr": {addr}, "size": {size}, "stream": 0, "time_us": {t}}}"#));
        }
        ann.push(format!(
            r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
            t + 1
        ));
    }
    leaks_of(&trace, &ann)
}

/// A finding's kind and site, and each of its sites with its role (by site).
type Shape<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);

/// The findings' kinds and sites, and each site's role (by site).
fn shape(r: &LeaksReport) -> Vec<Shape<'_>> {
    r.findings
        .iter()
        .map(|f| {
            let mut roles: Vec<(&str, &str)> =
                f.sites.iter().map(|s| (s.site.as_str(), s.role)).collect();
            roles.sort();
            (f.kind, f.site.as_str(), roles)
        })
        .collect()
}

/// GIVEN a retained graph's forward pass at train.py:20 and, at train.py:21, a loss computed
/// from its output outside any module's forward that keeps a 1 MiB tensor and the 4-byte
/// loss every step — `F.cross_entropy`, an `nn.CrossEntropyLoss` module, or raw tensor code
/// — WHEN leaks runs, THEN it is one finding of the graph, with that site as its `loss`.
#[test]
fn a_loss_computed_after_the_forward_joins_its_graph() {
    let functional = r#"[{"name": "cross_entropy", "filename": "/e/site-packages/torch/nn/functional.py", "line": 3479}, {"name": "main", "filename": "/u/train.py", "line": 21}]"#;
    let module = r#"[{"name": "cross_entropy", "filename": "/e/site-packages/torch/nn/functional.py", "line": 3479}, {"name": "forward", "filename": "/e/site-packages/torch/nn/modules/loss.py", "line": 1310}, {"name": "_call_impl", "filename": "/e/site-packages/torch/nn/modules/module.py", "line": 1747}, {"name": "main", "filename": "/u/train.py", "line": 21}]"#;
    let raw = r#"[{"name": "main", "filename": "/u/train.py", "line": 21}]"#;
    let want = vec![(
        "retained_graph",
        "/u/model.py:5:forward",
        vec![
            ("/u/model.py:5:forward", "saved"),
            ("/u/train.py:21:main", "loss"),
        ],
    )];
    for frames in [functional, module] {
        let r = after_a_graph(&[(frames, 1 << 20, false), (frames, 4, false)]);
        assert_eq!(shape(&r), want, "{frames}");
        let f = &r.findings[0];
        assert_eq!(f.bytes_per_step, (2 << 20) + 4);
        assert_eq!(f.tensors_per_step, 3.0);
        assert_eq!(f.live_bytes_at_end, 6 * ((2 << 20) + 4));
        assert!(f
            .fix
            .contains("what the loss computed at /u/train.py:21:main saved"));
    }
    // raw tensor code: the line keeps what it saved and makes the loss value (freed here)
    let r = after_a_graph(&[(raw, 1 << 20, false), (raw, 1 << 20, true), (raw, 4, true)]);
    assert_eq!(shape(&r), want);
    assert_eq!(r.findings[0].bytes_per_step, 2 << 20);
    // a slow one (its line grows too slowly to be a finding) joins too
    let r = after_a_graph(&[(functional, 4096, false), (functional, 4, false)]);
    assert_eq!(shape(&r), want);
    assert_eq!(r.findings[0].bytes_per_step, (1 << 20) + 4100);
}

/// GIVEN tensors kept every step after a retained graph's forward pass that no loss
/// computation made — a list of `F.softmax` outputs, a list of tensors made at a line that
/// makes no loss value, a list of loss values — WHEN leaks runs, THEN they stay a leak of
/// their own (the loss values, too slow to be a finding, are in none).
#[test]
fn what_no_loss_computation_made_stays_a_leak() {
    let softmax = r#"[{"name": "softmax", "filename": "/e/site-packages/torch/nn/functional.py", "line": 2140}, {"name": "main", "filename": "/u/train.py", "line": 21}]"#;
    let raw = r#"[{"name": "main", "filename": "/u/train.py", "line": 21}]"#;
    let leak = |r: &LeaksReport| {
        let kinds: Vec<(&str, &str)> = r
            .findings
            .iter()
            .map(|f| (f.kind, f.site.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("retained_graph", "/u/model.py:5:forward"),
                ("leak", "/u/train.py:21:main")
            ]
        );
        assert_eq!(r.findings[0].bytes_per_step, 1 << 20);
    };
    leak(&after_a_graph(&[(softmax, 1 << 20, false)]));
    leak(&after_a_graph(&[
        (raw, 1 << 20, false),
        (raw, 1 << 20, true),
    ]));
    // a list of loss values (scalars only) is not a graph's
    let r = after_a_graph(&[(raw, 4, false)]);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].bytes_per_step, 1 << 20);
}

/// GIVEN a loop whose per-step tensor is annotated as packed into the autograd graph but
/// allocated outside any module forward, WHEN leaks runs, THEN it is a retained graph and
/// the finding and its site list the annotation with its tensors and bytes; an annotate
/// made before the tensor at that address existed marks nothing (it is attached to the
/// allocation live at the address, not to the address).
#[test]
fn annotate_events_mark_retained_graphs() {
    let leaks = |annotate_first: bool| {
        let mut trace = Vec::new();
        let mut ann = Vec::new();
        let frames = r#"[{"name": "train_step", "filename": "/home/u/train.py", "line": 9}]"#;
        for step in 0..6u64 {
            let t0 = 1000 * step;
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
            ));
            let addr = 1 << 20 | step << 12;
            let alloc = format!(
                r#"{{"action": "alloc", "addr": {addr}, "size": 1048576, "stream": 0, "time_us": {}, "frames": {frames}}}"#,
                t0 + 1
            );
            let note = format!(
                r#"{{"action": "annotate", "addr": {addr}, "size": 0, "stream": 0, "time_us": {}, "user_metadata": "packed into the autograd graph"}}"#,
                t0 + 2
            );
            if annotate_first {
                trace.extend([note, alloc]);
            } else {
                trace.extend([alloc, note]);
            }
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
                t0 + 3
            ));
        }
        leaks_of(&trace, &ann)
    };
    let r = leaks(false);
    assert_eq!(r.findings.len(), 1, "{:?}", r.devices);
    let f = &r.findings[0];
    assert_eq!(f.kind, "retained_graph");
    assert_eq!(f.graph_evidence, Some(cause::AUTOGRAD_ANNOTATION));
    assert_eq!(f.bytes_per_step, 1 << 20);
    assert_eq!(f.site, "/home/u/train.py:9:train_step");
    let want = vec![AnnotationCount {
        text: "packed into the autograd graph".into(),
        count: 6,
        bytes: 6 << 20,
    }];
    assert_eq!(f.annotations, want);
    assert_eq!(f.sites[0].annotations, want);
    // annotated before the tensor was made: nothing to attach to, no evidence
    let r = leaks(true);
    assert_eq!(r.findings.len(), 1, "{:?}", r.devices);
    assert_eq!(r.findings[0].kind, "leak");
    assert!(r.findings[0].annotations.is_empty());
}

/// GIVEN a retained graph and a leak on separate lines, WHEN leaks runs, THEN each kind is
/// `found` on the device and over the report; GIVEN the same steps kept at stacks without
/// frames, THEN growth is `found` but neither kind can be judged (nothing shows a forward
/// pass), with what to record.
#[test]
fn each_kind_of_growth_is_judged_apart() {
    let r = two_lines(false);
    assert_eq!(r.judgement.state, JudgementState::Found);
    assert_eq!(r.leak.state, JudgementState::Found);
    assert_eq!(r.retained_graph.state, JudgementState::Found);
    assert_eq!(
        r.retained_graph.why,
        "judged 6 steps: 1 retained graph (biggest at /u/model.py:5:forward)"
    );
    assert_eq!(r.devices[0].leak, r.leak);
    let (mut trace, mut ann) = (Vec::new(), Vec::new());
    for step in 0..6u64 {
        let t0 = 1000 * step;
        ann.push(format!(
            r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
        ));
        trace.push(format!(
            r#"{{"action": "alloc", "addr": {}, "size": 1048576, "stream": 0, "time_us": {}}}"#,
            (step + 1) << 24,
            t0 + 1
        ));
        ann.push(format!(
            r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
            t0 + 9
        ));
    }
    let r = leaks_of(&trace, &ann);
    assert_eq!(r.judgement.state, JudgementState::Found);
    assert_eq!(r.findings[0].site, crate::vocab::sites::NO_FRAMES);
    for j in [&r.leak, &r.retained_graph] {
        assert_eq!(j.state, JudgementState::CannotJudge, "{j:?}");
        assert!(j.why.contains("stacks without frames"), "{}", j.why);
        assert!(j.record.as_deref().unwrap().contains("stacks="), "{j:?}");
    }
}

/// GIVEN growth that is only a leak, THEN the retained graph's `none` names the judged steps
/// (not the growth's own sentence).
#[test]
fn a_kind_not_found_is_none_over_the_judged_steps() {
    let r = after_a_graph(&[]);
    assert_eq!(r.retained_graph.state, JudgementState::Found);
    assert_eq!(r.leak.state, JudgementState::None);
    assert_eq!(
        r.leak.why,
        "judged 6 steps: nothing kept outside an autograd graph grows"
    );
}
