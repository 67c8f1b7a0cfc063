//! What the frames of one stack say to the category rules, found once per stack.

use super::UserRule;
use crate::model::{Snapshot, StackId};
use crate::replay::passes;
use crate::replay::steps::under_module_forward;
use crate::vocab::sites::{self, kinds, Kind};

/// The evidence of one stack.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The first user rule that one of its frames (`filename:line:name`) matches.
    pub rule: Option<usize>,
    /// The stack holds frames at all.
    pub has_frames: bool,
    /// A frame under `torch/optim` (every optimizer subclassing `torch.optim.Optimizer` runs
    /// under its `step` wrapper there).
    pub optim: bool,
    /// A frame named `zero_grad` (what frees gradients with `set_to_none`).
    pub zero_grad: bool,
    /// Python frames of an autograd backward call (`Tensor.backward`, `torch.autograd.grad`).
    pub backward_python: bool,
    /// The autograd engine's thread: a node's `apply` or the engine's frames (`stacks="all"`;
    /// that thread runs no Python but a custom function's backward), forward frames
    /// ([`crate::replay::passes::in_backward`] says the same of a stack).
    pub backward_thread: bool,
    /// A cuBLAS/cuDNN workspace ([`sites::is_workspace`]).
    pub workspace: bool,
    /// Module set-up: `.to`/`.cuda`/`_apply`, `nn.init`, `load_state_dict`, `nn.Parameter`.
    pub param_setup: bool,
    /// Data loading: `torch.utils.data`, `pin_memory`, `collate`.
    pub input_copy: bool,
    /// Under an `nn.Module` call.
    pub forward: bool,
    /// A frame inside torch.
    pub torch: bool,
    /// A key/value cache's code ([`is_kv_cache`]).
    pub kv_cache: bool,
}

impl Facts {
    /// The facts of `stack`; user rules match `filename:line:name` of any frame.
    pub fn of(snap: &Snapshot, stack: StackId, rules: &[UserRule]) -> Facts {
        // The frames recorded on the entry; `forward_frames` (the forward code a backward-pass
        // entry differentiates) say only that it ran in the backward pass.
        let (frames, forward) = snap.split_forward(stack);
        let texts: Vec<String> = if rules.is_empty() {
            Vec::new()
        } else {
            frames
                .iter()
                .map(|&f| sites::format_frame(snap, snap.frames.get(f)))
                .collect()
        };
        let mut facts = Facts {
            rule: rules
                .iter()
                .position(|r| texts.iter().any(|t| r.pattern.is_match(t))),
            has_frames: !frames.is_empty(),
            forward: under_module_forward(snap, stack),
            workspace: sites::is_workspace(snap, stack),
            kv_cache: is_kv_cache(snap, stack),
            ..Facts::default()
        };
        for &f in frames {
            let fr = snap.frames.get(f);
            let (raw, name) = (snap.strings.get(fr.filename), snap.strings.get(fr.name));
            // Windows paths (`C:\...\torch\optim\adam.py`) match like POSIX ones.
            let slashed;
            let file = if raw.contains('\\') {
                slashed = raw.replace('\\', "/");
                slashed.as_str()
            } else {
                raw
            };
            let kind = kinds::kind(file, name);
            facts.optim |= file.contains("torch/optim/");
            facts.zero_grad |= name == "zero_grad";
            facts.backward_python |= passes::is_backward_call(file, name);
            facts.param_setup |= is_param_setup(file, name);
            facts.input_copy |= !kinds::is_native_frame(file, name) && is_input_copy(file, name);
            facts.torch |= kind == Kind::Torch;
            facts.backward_thread |=
                kinds::is_native_frame(file, name) && passes::is_engine_frame(name);
        }
        facts.backward_thread |= !forward.is_empty() || passes::runs_custom_backward(snap, frames);
        facts
    }
}

fn is_param_setup(file: &str, name: &str) -> bool {
    (file.contains("torch/nn/modules/module.py")
        && matches!(
            name,
            "_apply" | "convert" | "cuda" | "to" | "load_state_dict" | "_load_from_state_dict"
        ))
        || file.contains("torch/nn/parameter.py")
        || file.contains("torch/nn/init.py")
        || name == "reset_parameters"
}

fn is_input_copy(file: &str, name: &str) -> bool {
    file.contains("torch/utils/data/")
        || name == "pin_memory"
        || name == "collate"
        || name == "default_collate"
}

/// True when a frame of `stack` is a key/value cache's code, outside torch:
/// - a function named for one (`_allocate_kv_cache`, `update_kvcache`, `past_key_values`);
/// - a file named for one that is not the program's own script (the file of its `<module>`
///   frame, which holds everything the program does): transformers' `cache_utils.py` and its
///   forks (`cache_utils_V2.py`), vLLM's `cache_engine.py`, SGLang's `mem_cache/`, a file
///   with a `kv` word (`kv.py`, `paged_kv.py`);
/// - a function with a `cache` word in a file with a `kv` word (`kv_cache.py:ensure_cache`).
pub fn is_kv_cache(snap: &Snapshot, stack: StackId) -> bool {
    let frames = snap.split_forward(stack).0;
    let python: Vec<(&str, &str)> = frames
        .iter()
        .map(|&f| {
            let fr = snap.frames.get(f);
            (snap.strings.get(fr.filename), snap.strings.get(fr.name))
        })
        .filter(|(file, name)| {
            !kinds::is_native_frame(file, name)
                && !kinds::is_torch(file)
                && !kinds::is_torch_generated(file)
        })
        .collect();
    let script = python
        .iter()
        .rev()
        .find(|(_, name)| *name == "<module>")
        .map(|(file, _)| *file);
    python.iter().any(|&(file, name)| {
        let fname = name.to_ascii_lowercase();
        let stem = kinds::basename(file)
            .trim_end_matches(".py")
            .to_ascii_lowercase();
        let file_words: Vec<&str> = stem.split(['_', '-', '.']).collect();
        let name_words: Vec<&str> = fname.split('_').collect();
        let named = fname.contains("kv_cache")
            || fname.contains("kvcache")
            || fname.contains("past_key_value")
            || name_words.contains(&"kv");
        let cache_file = stem.starts_with("cache_utils")
            || stem == "cache_engine"
            || file.replace('\\', "/").contains("/mem_cache/")
            || file_words.contains(&"kv")
            || stem.contains("kv_cache")
            || stem.contains("kvcache");
        named
            || (cache_file && Some(file) != script)
            || (name_words.contains(&"cache")
                && (file_words.contains(&"kv") || stem.contains("kvcache")))
    })
}
