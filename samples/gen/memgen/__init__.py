"""memgen: deterministic synthetic PyTorch CUDA memory snapshots (stdlib only).

Modules: allocator (caching-allocator simulator), stacks (frame/traceback model),
layout (snapshot object graphs of the Python, C++ and 2.0 producers), writers
(CPython pickle, C++ Pickler byte layout, JSON), scenarios (small samples),
big (large benchmark snapshots)."""
