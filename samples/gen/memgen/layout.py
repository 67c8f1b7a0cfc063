"""Turn simulator state into the object graphs PyTorch builds before pickling.

Python path (torch/csrc/cuda/Module.cpp THCPModule_memorySnapshot, 2.5+):
  segments / device_traces / allocator_settings / external_annotations; key strings
  are single objects (py::str locals), `frames` is inserted last for holders whose
  context is symbolized (so after `blocks` in such segments), holders without a
  context get the shared empty list; compile_context is a new str per entry;
  segment_pool_id a new tuple per segment.
C++ path (torch/csrc/cuda/memory_snapshot.cpp @127b7ad1e5): same dicts, trace key
  order action, addr, size, stream, compile_context, user_metadata, time_us, frames;
  `held` lists the containers whose IValue use_count > 1 at pickling time.
PyTorch 2.0: blocks have history and no address, no frames anywhere else.
"""

from .stacks import fresh

TRACE_KEYS_MODERN = ("time_us", "compile_context", "user_metadata")


def allocator_settings(config, graph_capture_key=True):
    s = {}
    s["PYTORCH_CUDA_ALLOC_CONF"] = fresh(config.alloc_conf)
    ms = config.max_split_size
    s["max_split_size"] = ms - (1 << 64) if ms >= (1 << 63) else ms  # int64(SIZE_MAX) == -1
    s["garbage_collection_threshold"] = float(config.garbage_collection_threshold)
    s["expandable_segments"] = bool(config.expandable_segments)
    s["pinned_num_register_threads"] = config.pinned_num_register_threads
    s["release_lock_on_cudamalloc"] = bool(config.release_lock_on_cudamalloc)
    s["pinned_use_cuda_host_register"] = bool(config.pinned_use_cuda_host_register)
    if graph_capture_key:
        s["graph_capture_record_stream_reuse"] = bool(config.graph_capture_record_stream_reuse)
    r = {}
    key = 1
    for v in config.roundup_power2_divisions:
        r[fresh(str(key))] = v
        key *= 2
    s["roundup_power2_divisions"] = r
    return s


def segment_dict(si, empty, modern=True):
    d = {}
    d["device"] = si.device
    d["address"] = si.address
    d["total_size"] = si.total_size
    d["allocated_size"] = si.allocated_size
    d["active_size"] = si.active_size
    d["requested_size"] = si.requested_size
    d["stream"] = si.stream
    d["segment_type"] = "large" if si.is_large else "small"
    if not modern:  # PyTorch 2.0
        blocks = []
        for bi in si.blocks:
            b = {"size": bi.size, "requested_size": bi.requested_size, "state": block_state(bi)}
            if bi.history:
                b["history"] = [{"addr": a, "real_size": rs, "frames": ctx} for (a, rs, ctx) in bi.history]
            blocks.append(b)
        d["blocks"] = blocks
        return d
    d["segment_pool_id"] = (si.pool_id[0], si.pool_id[1])  # new tuple per segment
    d["is_expandable"] = si.is_expandable
    # an empty traceback is reported like no context: the shared empty list, before blocks
    if not si.ctx:
        d["frames"] = empty
    blocks = []
    address = si.address
    for bi in si.blocks:
        b = {}
        b["address"] = address
        b["size"] = bi.size
        b["requested_size"] = bi.requested_size
        b["state"] = block_state(bi)
        b["frames"] = bi.ctx if bi.ctx else empty
        blocks.append(b)
        address += bi.size
    d["blocks"] = blocks
    if si.ctx:
        d["frames"] = si.ctx
    return d


def block_state(bi):
    if bi.allocated:
        return "active_allocated"
    return "active_pending_free" if bi.active else "inactive"


def trace_dict(te, keys=TRACE_KEYS_MODERN, compile_context="N/A", user_metadata=""):
    d = {}
    d["action"] = te.action
    if te.action == "oom":
        d["device_free"] = te.addr
    else:
        d["addr"] = te.addr
    d["size"] = te.size
    d["stream"] = te.stream
    for k in keys:
        if k == "time_us":
            d["time_us"] = te.time_us
        elif k == "compile_context":
            cc = compile_context
            if te.extra and "compile_context" in te.extra:
                cc = te.extra["compile_context"]
            d["compile_context"] = fresh(cc)
        elif k == "user_metadata":
            um = user_metadata
            if te.extra and "user_metadata" in te.extra:
                um = te.extra["user_metadata"]
            d["user_metadata"] = fresh(um)
    if te.ctx is not None:
        d["frames"] = te.ctx
    if te.extra and "forward_frames" in te.extra:
        d["forward_frames"] = te.extra["forward_frames"]
    return d


def annotation_dict(a):
    stage, name, device, time_us = a
    d = {}
    d[fresh("stage")] = fresh(stage)
    d[fresh("name")] = fresh(name)
    d["device"] = device
    d["time_us"] = time_us
    return d


def modern_snapshot(alloc, frames_table, trace_keys=TRACE_KEYS_MODERN, annotations=True,
                    settings=True, graph_capture_key=True):
    """The dict `torch.cuda.memory._snapshot()` returns (Python path)."""
    segments_info, traces_te = alloc.snapshot()
    empty = frames_table.empty
    segments = [segment_dict(si, empty) for si in segments_info]
    traces = [[trace_dict(te, trace_keys) for te in t] for t in traces_te]
    result = {}
    result["segments"] = segments
    result["device_traces"] = traces
    if settings:
        result["allocator_settings"] = allocator_settings(alloc.config, graph_capture_key)
    if annotations:
        result["external_annotations"] = [annotation_dict(a) for a in alloc.annotations]
    return result


def legacy_snapshot(alloc):
    """PyTorch 2.0 `_snapshot()`: blocks carry history, trace entries have no time_us."""
    segments_info, traces_te = alloc.snapshot()
    segments = [segment_dict(si, None, modern=False) for si in segments_info]
    traces = []
    for t in traces_te:
        lst = []
        for te in t:
            d = {"action": te.action, "addr": te.addr, "size": te.size, "stream": te.stream}
            if te.ctx is not None:
                d["frames"] = te.ctx
            lst.append(d)
        traces.append(lst)
    return {"segments": segments, "device_traces": traces}


def cpp_snapshot(alloc, frames_table):
    """`torch::cuda::_memory_snapshot_pickled()` object graph (@127b7ad1e5) and the ids of
    containers the C++ Pickler memoizes because something else still holds them."""
    segments_info, traces_te = alloc.snapshot()
    empty = frames_table.empty
    held = [empty]
    segments = []
    for si in segments_info:
        d = segment_dict(si, empty)
        if si.ctx:
            held.append(d)  # in frame_dict vector
        for b, bi in zip(d["blocks"], si.blocks):
            if bi.ctx:
                held.append(b)
        segments.append(d)
    traces = []
    for t in traces_te:
        lst = []
        for te in t:
            d = {}
            d["action"] = te.action
            d["device_free" if te.action == "oom" else "addr"] = te.addr
            d["size"] = te.size
            d["stream"] = te.stream
            d["compile_context"] = "N/A"
            d["user_metadata"] = ""
            d["time_us"] = te.time_us
            if te.ctx is not None:
                d["frames"] = te.ctx
                held.append(d)
            lst.append(d)
        traces.append(lst)
    # every symbolized traceback list is held by the `frames` vector
    for d in held[1:]:
        f = d.get("frames")
        if f is not None and f is not empty:
            held.append(f)
    settings = allocator_settings(alloc.config, True)
    annotations = [annotation_dict(a) for a in alloc.annotations]
    result = {}
    result["segments"] = segments
    result["device_traces"] = traces
    result["allocator_settings"] = settings
    result["external_annotations"] = annotations
    held.extend([result, segments, traces, settings, settings["roundup_power2_divisions"], annotations])
    return result, held
