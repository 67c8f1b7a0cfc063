"""Samples of what 2025-2026 recordings leave out or add around the trace: whole action kinds
skipped (`_record_memory_history(skip_actions=[...])`, PyTorch PR #168183), actions memlens
does not know (torch_npu's `workspace_snapshot`), and the allocator settings of 2026
(`PYTORCH_ALLOC_CONF`, `per_process_memory_fraction`, `throw_on_cudamalloc_oom`,
`graph_capture_record_stream_reuse`; PRs #161035, #179473).

Each is the 4-step training run of `train_small` with the trace filtered or extended the way
the recording would have written it; the facts (samples/truth/settings2026.json) come from the
full trace the scenario made, never from the written file.
"""

from .scenarios import train_small


def _live(entries, ends=("free_completed", "free")):
    """Peak and end live requested bytes of a trace whose allocations end at `ends`."""
    live, peak, by_addr = 0, 0, {}
    for e in entries:
        a = e["action"]
        if a == "alloc":
            by_addr[e["addr"]] = e["size"]
            live += e["size"]
            peak = max(peak, live)
        elif a in ends and e["addr"] in by_addr:
            live -= by_addr.pop(e["addr"])
    return {"peak_live_bytes": peak, "end_live_bytes": live}


def _counts(entries):
    out = {}
    for e in entries:
        out[e["action"]] = out.get(e["action"], 0) + 1
    return dict(sorted(out.items()))


def skipped(kind):
    """train_small recorded with skip_actions=[kind]."""
    def make(seed=1):
        snap = train_small(seed)
        full = snap["device_traces"][0]
        facts = _live(full)  # what the whole trace says
        snap["device_traces"][0] = [e for e in full if e["action"] != kind]
        facts["by_action"] = _counts(snap["device_traces"][0])
        facts["warning"] = "skipped_" + kind
        return snap, facts
    return make


def unknown_actions(seed=1):
    """train_small with a torch_npu-style `workspace_snapshot` entry after every 5th entry."""
    snap = train_small(seed)
    full = snap["device_traces"][0]
    facts = _live(full)
    out = []
    for i, e in enumerate(full):
        out.append(e)
        if i % 5 == 4:
            out.append({"action": "workspace_snapshot", "addr": e["addr"], "size": 1 << 20,
                        "stream": 0, "time_us": e.get("time_us", 0)})
    snap["device_traces"][0] = out
    facts["unknown_actions"] = {"workspace_snapshot": len(out) - len(full)}
    return snap, facts


FRACTION = 0.5


def alloc_conf_2026(seed=1):
    """train_small with the settings string of a 2026 run under the device-neutral name
    `PYTORCH_ALLOC_CONF` (what XPU's snapshot writes; CUDA's keeps `PYTORCH_CUDA_ALLOC_CONF`):
    a per-process fraction and throw_on_cudamalloc_oom, which PyTorch writes only in the string
    (no dict key of their own), and graph_capture_record_stream_reuse on (a dict key)."""
    snap = train_small(seed)
    s = snap["allocator_settings"]
    del s["PYTORCH_CUDA_ALLOC_CONF"]
    conf = "per_process_memory_fraction:%s,throw_on_cudamalloc_oom:True" % FRACTION
    settings = {"PYTORCH_ALLOC_CONF": conf}
    settings.update(s)
    settings["graph_capture_record_stream_reuse"] = True
    snap["allocator_settings"] = settings
    capacity = 16 << 30  # the --capacity the test passes: the device's memory
    return snap, {"conf_key": "PYTORCH_ALLOC_CONF", "fraction": FRACTION,
                  "device_bytes": capacity, "limit_bytes": int(capacity * FRACTION)}


XPU_ENTRY_KEYS = ("action", "addr", "device_free", "size", "stream", "time_us", "frames")


def xpu_device1(seed=1):
    """train_small as `torch.xpu.memory._dump_snapshot` writes it, on device 1: entries keep
    only XPU's keys (action, addr/device_free, size, stream, time_us, frames), the settings
    are XPU's two keys (`PYTORCH_ALLOC_CONF`, `expandable_segments`), and device 0 has an empty
    trace. No key names the device type; the settings' key set is the tell."""
    snap = train_small(seed)
    trace = [{k: v for k, v in e.items() if k in XPU_ENTRY_KEYS}
             for e in snap["device_traces"][0]]
    for seg in snap["segments"]:
        seg["device"] = 1
    snap["device_traces"] = [[], trace]
    snap["allocator_settings"] = {"PYTORCH_ALLOC_CONF": "", "expandable_segments": False}
    facts = _live(trace)
    facts.update({"device": 1, "device_type": "xpu", "device_label": "xpu:1"})
    return snap, facts


# name, writer, scenario
SETTINGS_SAMPLES = [
    ("skip_free_requested.pickle", "py4", skipped("free_requested")),
    ("skip_free_completed.pickle", "py4", skipped("free_completed")),
    ("unknown_actions.pickle", "py4", unknown_actions),
    ("alloc_conf_2026.pickle", "py4", alloc_conf_2026),
    ("xpu_device1.pickle", "py4", xpu_device1),
]
