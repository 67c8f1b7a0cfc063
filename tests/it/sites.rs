//! Sites and stacks a person recognises (issue 19, items 1 and 8): C++-only stacks named by
//! their autograd node or C++ function, `--frames python|cpp|all`, flames in call order with
//! the allocator folded, library frames as context beside the user's line. On the generated
//! `train_stacks_all` sample (its truth), the GPU capture `stacks_all` and real files.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

fn folded(args: &[&str], file: &Path) -> Vec<(Vec<String>, u64)> {
    let mut a: Vec<std::ffi::OsString> = vec!["flame".into(), "--format".into(), "folded".into()];
    a.extend(args.iter().map(|x| x.into()));
    a.push(file.into());
    let o = memlens(a);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, w) = l.rsplit_once(' ').unwrap();
            let frames: Vec<String> = stack.split(';').skip(1).map(str::to_string).collect();
            (frames, w.parse().unwrap())
        })
        .collect()
}

fn rows(top: &Value) -> &Vec<Value> {
    top["devices"][0]["sites"].as_array().unwrap()
}

/// Bytes of the rows whose site is `site` (and whose context is `context`, when given).
fn bytes_at(top: &Value, site: &str, context: Option<&str>) -> u64 {
    rows(top)
        .iter()
        .filter(|r| r["site"] == site && context.map_or(true, |c| r["context"] == c))
        .map(|r| as_u64(&r["bytes"]))
        .sum()
}

/// The label of memory alive before the trace with no stack recorded.
const BEFORE: &str = "<before trace, no stack>";
/// ... taken for parameters by the category rules.
const PARAMETERS_BEFORE: &str = "<before trace, no stack> likely parameters";

/// A flame frame is C++ when it carries no ` (file:line)` (a Python frame always does).
fn is_cpp(label: &str) -> bool {
    !(label.ends_with(')') && label.contains(" ("))
}

#[test]
fn a_stack_without_python_frames_is_named_by_its_autograd_node() {
    let p = root().join("samples/captured/stacks_all.pickle");
    // Before: 32.25 MiB (a cuBLAS workspace and x.grad, both on the autograd thread) were
    // `<no frames>`.
    let top = json_report(&["top", "--at", "end"], &p);
    assert!(
        rows(&top).iter().all(|r| r["site"] != "<no frames>"),
        "{top}"
    );
    assert_eq!(
        bytes_at(
            &top,
            "autograd: MmBackward0",
            Some("at::cuda::setWorkspaceForHandle")
        ),
        32 << 20
    );
    assert_eq!(
        bytes_at(
            &top,
            "autograd: MmBackward0",
            Some("torch::autograd::generated::details::mm_mat1_backward")
        ),
        256 << 10
    );
    // The forward's workspace keeps its user line, with the workspace beside it.
    let fwd = rows(&top)
        .iter()
        .find(|r| {
            r["site"]
                .as_str()
                .unwrap()
                .ends_with("stacks_all.py:35:forward_backward")
                && r["context"] == "at::cuda::setWorkspaceForHandle"
        })
        .unwrap_or_else(|| panic!("{top}"));
    assert_eq!(as_u64(&fwd["bytes"]), 32 << 20);
    // --frames python: the old answer, a stack of C++ frames alone has no site.
    let py = json_report(&["top", "--at", "end", "--frames", "python"], &p);
    assert_eq!(bytes_at(&py, "<no frames>", None), (32 << 20) + (256 << 10));
    assert!(rows(&py).iter().all(|r| r.get("context").is_none()));
    // --frames cpp: C++ sites only, every byte accounted for.
    let cpp = json_report(&["top", "--at", "end", "--frames", "cpp"], &p);
    for r in rows(&cpp) {
        let s = r["site"].as_str().unwrap();
        assert!(!s.contains(".py:"), "{s}");
    }
    assert_eq!(
        cpp["devices"][0]["total"], top["devices"][0]["total"],
        "the same bytes, grouped otherwise"
    );
}

#[test]
fn engine_sites_and_library_context_on_the_generated_training_step() {
    let t = truth("train_stacks_all");
    let p = sample("train_stacks_all.pickle");
    let end = json_report(&["top", "--at", "end", "-n", "100"], &p);
    for (node, bytes) in t["gradient_bytes_by_node_at_end"].as_object().unwrap() {
        let site = format!("autograd: {node}");
        let grads: u64 = rows(&end)
            .iter()
            .filter(|r| {
                r["site"] == site.as_str() && r["context"] != "at::cuda::setWorkspaceForHandle"
            })
            .map(|r| as_u64(&r["bytes"]))
            .sum();
        assert_eq!(grads, as_u64(bytes), "{node}: {end}");
    }
    assert_eq!(
        bytes_at(
            &end,
            "autograd: MmBackward0",
            Some("at::cuda::setWorkspaceForHandle")
        ),
        32 << 20
    );
    // At the peak the einsum lines are user lines, einops beside them, never a site.
    let peak = json_report(&["top", "-n", "100"], &p);
    for r in rows(&peak) {
        assert!(
            !r["site"].as_str().unwrap().contains("site-packages"),
            "{r}"
        );
    }
    let einsum = rows(&peak)
        .iter()
        .find(|r| r["site"] == t["einsum_site"] && r["context"] == t["einsum_context"])
        .unwrap_or_else(|| panic!("{peak}"));
    assert!(as_u64(&einsum["bytes"]) > 0);
    // --keep libraries: the library frame is the site again.
    let kept = json_report(&["top", "-n", "100", "--keep", "libraries"], &p);
    assert!(rows(&kept).iter().any(|r| r["site"]
        .as_str()
        .unwrap()
        .ends_with("einops/_backends.py:291:einsum")));
    assert_eq!(kept["devices"][0]["total"], peak["devices"][0]["total"]);
}

#[test]
fn flames_interleave_python_and_cpp_frames_in_call_order() {
    let mut files = vec![
        sample("train_stacks_all.pickle"),
        root().join("samples/captured/stacks_all.pickle"),
    ];
    files.extend(require_real(
        "Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
    ));
    for p in &files {
        let stacks = folded(&[], p);
        let mut python_stacks = 0;
        for (frames, _) in &stacks {
            // A main-thread stack runs from `<module>` through Python to C++: once a C++
            // frame appears no Python frame follows (PyTorch appends them after `_start`).
            if frames.iter().any(|f| !is_cpp(f)) && frames[0] != "<no frames>" {
                python_stacks += 1;
                assert!(
                    frames[0].starts_with("<module> ("),
                    "{}: {frames:?}",
                    p.display()
                );
                let first_cpp = frames
                    .iter()
                    .position(|f| is_cpp(f))
                    .unwrap_or(frames.len());
                assert!(
                    frames[first_cpp..].iter().all(|f| is_cpp(f)),
                    "{}: {frames:?}",
                    p.display()
                );
            }
            // The interpreter, the dispatcher and the allocator's own frames are folded.
            for f in frames {
                for hidden in [
                    "_PyEval_EvalFrameDefault",
                    "_start",
                    "wrap_kernel_functor_unboxed_",
                    "CUDACachingAllocator",
                    "at::detail::empty",
                    "torch::autograd::Engine::evaluate_function",
                ] {
                    assert!(!f.contains(hidden), "{}: {f} in {frames:?}", p.display());
                }
            }
        }
        assert!(python_stacks > 0, "{}", p.display());
        // The autograd thread's stacks hang under the engine, named by their node.
        assert!(
            stacks.iter().any(
                |(f, _)| f[0].starts_with("torch::autograd::Engine::thread_main")
                    && f.iter().any(|x| x.ends_with("Backward0::apply"))
            ),
            "{}",
            p.display()
        );
        // --allocator-frames keeps the caching allocator; weights are the same either way.
        let kept = folded(&["--allocator-frames"], p);
        assert!(kept
            .iter()
            .any(|(f, _)| f.iter().any(|x| x.contains("CUDACachingAllocator"))));
        let total = |s: &[(Vec<String>, u64)]| s.iter().map(|(_, w)| w).sum::<u64>();
        assert_eq!(total(&kept), total(&stacks));
        // --frames python: Python frames only; cpp: C++ frames only.
        for (frames, _) in folded(&["--frames", "python"], p) {
            assert!(
                frames
                    .iter()
                    .all(|f| !is_cpp(f) || f == "<no frames>" || f.starts_with(BEFORE)),
                "{frames:?}"
            );
        }
        for (frames, _) in folded(&["--frames", "cpp"], p) {
            assert!(frames.iter().all(|f| is_cpp(f)), "{frames:?}");
        }
    }
}

#[test]
fn einops_is_context_on_the_real_training_snapshot() {
    let Some(p) = require_real(
        "Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
    ) else {
        return;
    };
    // Before: `einops/_backends.py:291:einsum` topped the list with 3.06 GiB (435 allocations)
    // from several user lines.
    let top = json_report(&["top", "-n", "1000"], &p);
    for r in rows(&top) {
        assert!(
            !r["site"].as_str().unwrap().contains("site-packages"),
            "{r}"
        );
    }
    let first = &rows(&top)[0];
    assert!(first["site"]
        .as_str()
        .unwrap()
        .ends_with("cs336_basics/model.py:39:forward"));
    assert!(first["context"]
        .as_str()
        .unwrap()
        .ends_with("site-packages/einops/_backends.py:291:einsum"));
    assert_eq!(as_u64(&first["bytes"]), 2179563520);
    assert_eq!(as_u64(&first["count"]), 339);
    // At the end: the gradients are named by the engine's work, none is `<no frames>`; the
    // 226 frameless blocks older than the trace are labelled by their likely kind.
    let end = json_report(&["top", "--at", "end", "-n", "1000"], &p);
    assert_eq!(
        bytes_at(
            &end,
            "autograd: AccumulateGrad",
            Some("torch::autograd::utils::clone_obey_contract")
        ),
        1651572736
    );
    assert_eq!(bytes_at(&end, "autograd: IndexBackward0", None), 40960000);
    assert_eq!(
        bytes_at(&end, "autograd: InputMetadata::reduce_grad", None),
        200704
    );
    assert_eq!(bytes_at(&end, "<no frames>", None), 0);
    assert_eq!(bytes_at(&end, PARAMETERS_BEFORE, None), 1710100480);
}

#[test]
fn every_real_stacks_all_file_keeps_its_bytes_across_frame_choices() {
    let Some(files) = require_shared() else {
        return;
    };
    for p in files {
        let all = json_report(&["top", "-n", "3"], &p);
        for frames in ["python", "cpp"] {
            let other = json_report(&["top", "-n", "3", "--frames", frames], &p);
            for (a, b) in all["devices"]
                .as_array()
                .unwrap()
                .iter()
                .zip(other["devices"].as_array().unwrap())
            {
                assert_eq!(a["total"], b["total"], "{} --frames {frames}", p.display());
            }
        }
    }
}

/// The rows of `top` labelled as memory alive before the trace with no stack recorded.
fn older_rows(top: &Value) -> Vec<&Value> {
    rows(top)
        .iter()
        .filter(|r| r["predates_trace"] == true)
        .collect()
}

/// The bytes and allocations `categories` puts in `category`.
fn category(cats: &Value, category: &str) -> (u64, u64) {
    cats["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == category)
        .map_or((0, 0), |c| (as_u64(&c["bytes"]), as_u64(&c["count"])))
}

/// GIVEN late_grads (a ring buffer of 31 entries: parameters with their set-up frames,
/// gradients made on the autograd thread without frames and momentum buffers, all older than
/// the trace) WHEN `top` lists the peak THEN the frameless gradients older than the trace are
/// one row labelled by their likely kind, `categories`' own verdict, with the truth's bytes;
/// the frameless temporary the trace's backward pass made keeps `<no frames>`.
#[test]
fn memory_older_than_the_trace_without_a_stack_is_labelled_by_its_likely_kind() {
    let t = truth("late_grads");
    let p = sample("late_grads.pickle");
    let top = json_report(&["top", "-n", "100"], &p);
    let older = older_rows(&top);
    assert_eq!(older.len(), 1, "{top}");
    let row = older[0];
    assert_eq!(row["site"], "<before trace, no stack> likely gradients");
    assert_eq!(row["likely_kind"], "gradients");
    assert_eq!(row["kind_confidence"], "low");
    let evidence = row["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with("alive before the trace's first event and no stack recorded")
            && evidence.contains("with a parameter's size"),
        "{evidence}"
    );
    assert_eq!(as_u64(&row["bytes"]), as_u64(&t["gradient_bytes"]));
    assert_eq!(as_u64(&row["count"]), 7);
    let cats = json_report(&["categories"], &p);
    assert_eq!(
        category(&cats, "gradients"),
        (as_u64(&row["bytes"]), as_u64(&row["count"]))
    );
    // Made during the trace (a backward temporary of the autograd thread): no label.
    let during: Vec<&Value> = rows(&top)
        .iter()
        .filter(|r| r["site"] == "<no frames>")
        .collect();
    assert_eq!(during.len(), 1, "{top}");
    assert!(during[0].get("predates_trace").is_none(), "{top}");
    assert_eq!(
        (as_u64(&during[0]["bytes"]), as_u64(&during[0]["count"])),
        (16 << 20, 1)
    );
    // The text table names it and a note gives the evidence; the flamegraph's only frame is
    // the label.
    let o = memlens_in_root(["top", "samples/late_grads.pickle"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("┆ <before trace, no stack> likely gradients │"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "note: <before trace, no stack> likely gradients: {evidence}"
        )),
        "{text}"
    );
    let flame = folded(&[], &p);
    let labelled: Vec<&(Vec<String>, u64)> = flame
        .iter()
        .filter(|(f, _)| f[0].starts_with(BEFORE))
        .collect();
    assert_eq!(labelled.len(), 1, "{flame:?}");
    assert_eq!(
        labelled[0].0,
        vec!["<before trace, no stack> likely gradients"]
    );
    assert_eq!(labelled[0].1, as_u64(&t["gradient_bytes"]));
    // Grouped by stack, file or function, the same row.
    for by in ["stack", "file", "function"] {
        let other = json_report(&["top", "-n", "100", "--by", by], &p);
        let o = older_rows(&other);
        assert_eq!(o.len(), 1, "--by {by}: {other}");
        assert_eq!(o[0]["site"], row["site"], "--by {by}");
        assert_eq!(o[0]["bytes"], row["bytes"], "--by {by}");
    }
}

/// GIVEN serve_kv (weights loaded before history was recorded: no frames, no trace entry)
/// THEN they are `<before trace, no stack> likely parameters` with the truth's bytes, the
/// row on top at the peak, and `categories` calls the same bytes parameters.
#[test]
fn weights_loaded_before_the_recording_are_likely_parameters() {
    let t = truth("serve_kv");
    let p = sample("serve_kv.pickle");
    let top = json_report(&["top"], &p);
    let first = &rows(&top)[0];
    assert_eq!(first["site"], PARAMETERS_BEFORE);
    assert_eq!(first["predates_trace"], true);
    assert_eq!(first["likely_kind"], "parameters");
    assert_eq!(as_u64(&first["bytes"]), as_u64(&t["parameter_bytes"]));
    let cats = json_report(&["categories"], &p);
    assert_eq!(
        category(&cats, "parameters"),
        (as_u64(&first["bytes"]), as_u64(&first["count"]))
    );
    assert!(rows(&top).iter().all(|r| r["site"] != "<no frames>"));
}

/// GIVEN train_small (gradients made on the autograd thread without frames, during the
/// trace) THEN nothing is labelled as older than the trace: they stay `<no frames>`, the
/// bytes `categories` calls gradients made during a backward pass.
#[test]
fn frameless_memory_made_during_the_trace_keeps_no_frames() {
    let p = sample("train_small.pickle");
    let top = json_report(&["top", "-n", "100"], &p);
    assert!(older_rows(&top).is_empty(), "{top}");
    let cats = json_report(&["categories"], &p);
    assert_eq!(
        bytes_at(&top, "<no frames>", None),
        category(&cats, "gradients").0
    );
}
