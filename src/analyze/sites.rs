//! Call sites: which frame of an allocation stack names the user's line of code.
//!
//! Site = the innermost frame that is neither a C++/interpreter frame (filename `??`, empty,
//! a C/C++/CUDA source, a shared object, object file or assembly: `.so`, `libc.so.6`, `.dylib`,
//! `.dll`, `.pyd`, `.o`, `.S`; the Python interpreter itself, `/usr/bin/python3.12`, as
//! `stacks="all"` records it with the fast symbolizer; or a function named `??`) nor inside
//! the `torch` package (a directory named `torch`); the
//! innermost Python frame when every Python frame is inside torch; `<no frames>` when the
//! stack holds no Python frame. Written `filename:line:name`, the filename as recorded.

use crate::model::{Frame, FrameId, Snapshot, StackId};

/// The label of an allocation without Python frames.
pub const NO_FRAMES: &str = "<no frames>";

/// Options of site attribution.
#[derive(Clone, Copy, Debug, Default)]
pub struct SiteOptions {
    /// Let frames inside the `torch` package be sites (`--keep torch`).
    pub keep_torch: bool,
}

/// True for C++ and interpreter frames, by filename: sources and objects of C, C++, CUDA and
/// assembly, shared libraries (versioned too: `libc.so.6`), and the Python interpreter binary.
pub fn is_native(filename: &str) -> bool {
    if filename.is_empty() || filename == "??" {
        return true;
    }
    const NATIVE: [&str; 15] = [
        ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh", ".so", ".o", ".s", ".dylib",
        ".dll", ".pyd", ".exe",
    ];
    let lower = filename.to_ascii_lowercase();
    NATIVE.iter().any(|ext| lower.ends_with(ext))
        || is_versioned_shared_object(&lower)
        || is_python_binary(&lower)
}

/// The last path component.
fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// `libc.so.6`, `libcudart.so.12.4.127`: a shared object with a version suffix.
fn is_versioned_shared_object(lower: &str) -> bool {
    let name = basename(lower);
    name.split_once(".so.")
        .is_some_and(|(_, v)| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// `python`, `python3.12`, `python3.13t`: the interpreter executable, which `stacks="all"`
/// names as the file of its own C frames (`/usr/bin/python3.12:…:_PyEval_EvalFrameDefault`).
fn is_python_binary(lower: &str) -> bool {
    basename(lower).strip_prefix("python").is_some_and(|rest| {
        rest.bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b"dmtu".contains(&b))
            && !rest.ends_with('.')
    })
}

/// True for C++ and interpreter frames: a native filename ([`is_native`]) or a function the
/// symbolizer could not name (`??`), which no Python function is called.
pub fn is_native_frame(filename: &str, name: &str) -> bool {
    name == "??" || is_native(filename)
}

/// True for frames inside the `torch` package (a `torch` path component).
pub fn is_torch(filename: &str) -> bool {
    let mut parts = filename.split(['/', '\\']);
    parts.next_back(); // the file itself
    parts.any(|p| p == "torch")
}

/// True for frames PyTorch's own viewer hides (interpreter and dispatcher plumbing).
pub fn is_noise(filename: &str, name: &str) -> bool {
    const FUNCTIONS: [&str; 8] = [
        "unwind::unwind",
        "CapturedTraceback::gather",
        "gather_with_cpp",
        "_start",
        "__libc_start_main",
        "PyEval_",
        "PyObject_",
        "PyFunction_",
    ];
    const FILES: [&str; 10] = [
        "core/boxing",
        "/Register",
        "/Redispatch",
        "pythonrun.c",
        "Modules/main.c",
        "Objects/call.c",
        "Objects/methodobject.c",
        "pycore_ceval.h",
        "ceval.c",
        "cpython/abstract.h",
    ];
    FUNCTIONS.iter().any(|f| name.contains(f)) || FILES.iter().any(|f| filename.contains(f))
}

/// The frame that names the site of `stack`, if any.
pub fn site_frame(snap: &Snapshot, stack: StackId, opts: SiteOptions) -> Option<FrameId> {
    let frames = snap.stacks.get(stack);
    let mut first_python = None;
    for &f in frames {
        let fr = snap.frames.get(f);
        let file = snap.strings.get(fr.filename);
        if is_native_frame(file, snap.strings.get(fr.name)) {
            continue;
        }
        if opts.keep_torch || !is_torch(file) {
            return Some(f);
        }
        first_python.get_or_insert(f);
    }
    first_python
}

/// `filename:line:name` of a frame (line -1 when unknown).
pub fn format_frame(snap: &Snapshot, frame: &Frame) -> String {
    format!(
        "{}:{}:{}",
        snap.strings.get(frame.filename),
        frame.line,
        snap.strings.get(frame.name)
    )
}

/// The site label of `stack`.
pub fn site_label(snap: &Snapshot, stack: StackId, opts: SiteOptions) -> String {
    match site_frame(snap, stack, opts) {
        Some(f) => format_frame(snap, snap.frames.get(f)),
        None => NO_FRAMES.to_string(),
    }
}

/// The frames of `stack` without interpreter noise, innermost first.
pub fn filtered_frames(snap: &Snapshot, stack: StackId) -> Vec<FrameId> {
    snap.stacks
        .get(stack)
        .iter()
        .copied()
        .filter(|&f| {
            let fr = snap.frames.get(f);
            !is_noise(snap.strings.get(fr.filename), snap.strings.get(fr.name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_and_torch_frames() {
        assert!(is_native("??"));
        assert!(is_native(""));
        assert!(is_native("CUDACachingAllocator.cpp"));
        assert!(is_native("/usr/src/python/Objects/call.c"));
        assert!(!is_native("/home/u/train.py"));
        // stacks="all" with the fast symbolizer (PyTorch 2.11): binaries and versioned libraries
        assert!(is_native("/usr/bin/python3.12"));
        assert!(is_native("/opt/conda/bin/python"));
        assert!(is_native("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(is_native("/usr/lib/libcudart.so.12.4.127"));
        assert!(is_native("C:\\Python312\\python.exe"));
        assert!(!is_native("/home/u/python_utils.py"));
        assert!(!is_native("/home/u/pythonic/run.py"));
        assert!(!is_native("/home/u/libs.so.py"));
        assert!(!is_native("<eval_with_key>.0"));
        assert!(is_native_frame("/usr/local/bin/app", "??"));
        assert!(!is_native_frame("/home/u/train", "main"));
        assert!(is_torch(
            "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py"
        ));
        assert!(is_torch("torch/_tensor.py"));
        assert!(!is_torch("/home/u/torchvision_stuff/model.py"));
        assert!(!is_torch("/home/u/torch.py"));
        assert!(is_noise("Objects/call.c", "x"));
        assert!(is_noise("a.cpp", "PyEval_EvalFrameDefault"));
        assert!(!is_noise("/home/u/train.py", "forward"));
    }
}
