"""Stack model: frame dicts and tracebacks the way PyTorch's symbolizer emits them.

* one dict per unique frame, shared by every traceback that contains it
  (Python: per code object + instruction; C++: per instruction pointer);
* one new list per captured traceback (each malloc / free call), innermost frame first;
* the strings inside a frame dict are new objects per frame dict (so an equal path
  is written several times by the Python pickler), the keys are shared;
* one shared empty list for every holder without frames.
"""

LINE_NONE_PY = (1 << 64) - 1  # Python path: "no line" (-1) cast to uint64
LINE_NONE_CPP = -1            # 2.0 and the C++ pickler keep -1

PY = "/opt/conda/lib/python3.11"
TORCH = PY + "/site-packages/torch"
USER = "/home/user/proj"
CPY = "/usr/local/src/conda/python-3.11.9"


def fresh(s):
    """A str equal to s but a distinct object (like a py::str made from a std::string)."""
    if len(s) < 2:
        return s  # CPython caches the empty and 1-character latin-1 strings anyway
    return (s + "\0")[:-1]


def py(name, filename, line):
    return ("py", name, filename, line)


def cpp(name, filename="??", line=0):
    return ("cpp", name, filename, line)


class FrameTable:
    """Owns the frame dicts of one snapshot and builds tracebacks from frame specs."""

    def __init__(self, key_order=("name", "filename", "line"), share=True):
        self.key_order = key_order
        self.share = share
        self.cache = {}
        self.empty = []  # the one shared empty frames list

    def frame(self, spec):
        _kind, name, filename, line = spec
        key = (name, filename, line)
        if self.share:
            d = self.cache.get(key)
            if d is not None:
                return d
        vals = {"name": fresh(name), "filename": fresh(filename), "line": line}
        d = {k: vals[k] for k in self.key_order}
        if self.share:
            self.cache[key] = d
        return d

    def stack(self, specs):
        """A new traceback list (innermost first); [] specs give the shared empty list."""
        if not specs:
            return self.empty
        return [self.frame(s) for s in specs]


# ---------------------------------------------------------------------------
# Python call paths (innermost first). Lines are plausible for torch 2.5/2.6.

def module_call():
    return [py("_call_impl", TORCH + "/nn/modules/module.py", 1747),
            py("_wrapped_call_impl", TORCH + "/nn/modules/module.py", 1736)]


def user_main(script="train.py", fn_line=58, main_line=97, mod_line=121, fn="train_step"):
    return [py(fn, USER + "/" + script, fn_line),
            py("main", USER + "/" + script, main_line),
            py("<module>", USER + "/" + script, mod_line)]


# C++ frames of a caching-allocator malloc under stacks="all" (innermost first)
CPP_MALLOC_HEAD = [
    cpp("torch::unwind::unwind()"),
    cpp("torch::CapturedTraceback::gather(bool, bool, bool)"),
    cpp("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"),
    cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
        "CUDACachingAllocator.cpp"),
    cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)", ""),
    cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", ""),
    cpp("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
    cpp("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
    cpp("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)"),
    cpp("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
    cpp("at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
        "RegisterCUDA.cpp"),
    cpp("at::_ops::empty_memory_format::redispatch(c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)"),
]

CPP_INTERP_TAIL = [
    cpp("PyEval_EvalCode", CPY + "/Python/ceval.c", 1148),
    cpp("run_eval_code_obj", CPY + "/Python/pythonrun.c", 1741),
    cpp("run_mod", CPY + "/Python/pythonrun.c", 1762),
    cpp("pyrun_file", CPY + "/Python/pythonrun.c", 1657),
    cpp("_PyRun_SimpleFileObject", CPY + "/Python/pythonrun.c", 440),
    cpp("_PyRun_AnyFileObject", CPY + "/Python/pythonrun.c", 79),
    cpp("pymain_run_file_obj", CPY + "/Modules/main.c", 360),
    cpp("Py_BytesMain", CPY + "/Modules/main.c", 734),
    cpp("__libc_start_call_main", "??", 0),
    cpp("__libc_start_main_alias_2", "", 0),
    cpp("_start", "??", 0),
]

EVAL_FRAME = cpp("_PyEval_EvalFrameDefault", CPY + "/Python/ceval.c", 5212)


def interleave_cpp(py_frames, op_frames):
    """stacks="all": C++ malloc frames, the operator's C++ frames, then each Python
    frame followed by its _PyEval_EvalFrameDefault C frame, then the interpreter tail."""
    out = list(CPP_MALLOC_HEAD) + list(op_frames)
    for f in py_frames:
        out.append(f)
        out.append(EVAL_FRAME)
        out.append(cpp("_PyObject_VectorcallTstate", CPY + "/Include/internal/pycore_call.h", 92))
    out.extend(CPP_INTERP_TAIL)
    return out
