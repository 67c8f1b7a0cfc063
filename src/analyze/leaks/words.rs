//! The sentences of a finding: what to change, and why it is a retained graph or a leak.

use super::cause::{AUTOGRAD_ANNOTATION, KEPT_INTERMEDIATES, MODULE_FORWARD};

/// `1 tensor`, `2.5 tensors`.
fn tensors(n: f64) -> String {
    if n == 1.0 {
        "1 tensor".into()
    } else {
        format!("{} tensors", trim(n))
    }
}

/// `2`, `2.5`: a count with the decimals it has.
fn trim(n: f64) -> String {
    let s = format!("{n:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What to do about a cause at `site` keeping `per_step` tensors each step; `inputs` are the
/// sites attached as its forward pass's input, `losses` those attached as its loss computation.
pub(super) fn fix(
    graph: bool,
    site: &str,
    per_step: f64,
    inputs: &[&str],
    losses: &[&str],
) -> String {
    if graph {
        let mut parts = Vec::new();
        match inputs {
            [] => {}
            [one] => parts.push(format!("its input made at {one}")),
            many => parts.push(format!("its inputs made at {}", many.join(", "))),
        }
        if !losses.is_empty() {
            parts.push(format!(
                "what the loss computed at {} saved",
                losses.join(", ")
            ));
        }
        let included = if parts.is_empty() {
            String::new()
        } else {
            format!(", {} included", parts.join(" and "))
        };
        format!(
            "the forward pass run at {site} keeps its autograd graph after every step, and with it the {} per step it saved for backward{included}: if its result only feeds a running total or a log, keep `.item()` (or `.detach()`) of it, not the tensor (`total += loss` keeps every step's graph); if no backward is meant (validation, generation), run it under `torch.no_grad()` or `torch.inference_mode()`",
            tensors(per_step)
        )
    } else if let Some(node) = site.strip_prefix("autograd: ") {
        format!(
            "the autograd engine's {node} makes {} per step that are never released, and no Python line was recorded for them: gradients (or their copies) kept step after step — `.grad` tensors appended to a list or stored in a dict, `retain_grad()` on a growing set of tensors, or `backward(retain_graph=True)` on graphs that are kept; keep `.detach().cpu()` copies or bound the container",
            tensors(per_step)
        )
    } else {
        format!(
            "tensors made at {site} every step ({} per step) are never released: a Python list or dict that grows, a cache without eviction, or a loss accumulated as a tensor (`total += loss` keeps each step's autograd graph and the tensors it saved, even outside a module's forward); keep `.item()` / `.detach().cpu()` copies, or bound the container",
            tensors(per_step)
        )
    }
}

/// Why a cause of `lines` growing sites is a retained graph (its evidence) or a leak; `loss`:
/// a loss computation's tensors joined it.
pub(super) fn why(graph: Option<&str>, lines: usize, loss: bool) -> String {
    let why = why_kind(graph, lines);
    if graph.is_some() && loss {
        format!("{why}; the loss computed from its output after it, outside any module's forward, saved tensors for the same graph")
    } else {
        why
    }
}

/// [`why`] without the loss.
fn why_kind(graph: Option<&str>, lines: usize) -> String {
    match graph {
        Some(MODULE_FORWARD) => "the kept tensors were made under a module's forward: activations autograd saved for backward".into(),
        Some(AUTOGRAD_ANNOTATION) => "the trace marks the kept tensors as packed into the autograd graph".into(),
        Some(KEPT_INTERMEDIATES) => format!(
            "{lines} lines of one computation keep a tensor every step while its other tensors are freed: intermediate results an autograd graph saved (a container keeps what the code put in it, not a computation's intermediates)"
        ),
        _ => "the kept tensors were made outside any module's forward and are not intermediates of one computation: something holds on to what the code made".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_written() {
        assert_eq!(tensors(1.0), "1 tensor");
        assert_eq!(tensors(19.0), "19 tensors");
        assert_eq!(tensors(2.5), "2.5 tensors");
        assert_eq!(tensors(0.33), "0.33 tensors");
    }
}
