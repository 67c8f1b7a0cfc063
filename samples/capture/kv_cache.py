#!/usr/bin/env python3
"""Capture 4: inference with a KV cache that fills once (no leak), and (``--leak``)
the same loop keeping every step's logits in a list that only grows.

A 2-layer single-head decoder runs 4 requests x 32 greedy decode steps under
``torch.inference_mode()``.  The KV cache (2 layers x K/V x 32 x 1024 x 256 fp32 =
128 MiB) is allocated once, lazily, at the first step, and reused by every
request (positions are overwritten): after step 0 live memory is flat.

``--leak`` adds ``history.append(logits)`` (32 x 16384 fp32 = 2 MiB per step),
the classic "keep outputs for later" leak: live memory grows by exactly 2 MiB per
decode step across all requests, and at the end the logits site (256 MiB) tops
the KV cache (128 MiB).

Outputs: ``kv_cache.pickle``/``.truth.json`` or ``kv_cache_leak.*``.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

B, D, LAYERS, V = 32, 256, 2, 16384
MAX_LEN = 1024
REQUESTS, TOKENS = 4, 32
F32 = 4


class Model:
    def __init__(self, torch):
        self.torch = torch
        self.emb = torch.randn(V, D, device="cuda")  # @site emb
        self.wqkv = []
        self.wo = []
        for _ in range(LAYERS):
            self.wqkv.append(torch.randn(D, 3 * D, device="cuda") * 0.05)  # @site wqkv
            self.wo.append(torch.randn(D, D, device="cuda") * 0.05)  # @site wo
        self.w_out = torch.randn(D, V, device="cuda")  # @site w_out
        self.cache = None

    def ensure_cache(self):
        if self.cache is None:          # allocated once, at the very first step
            self.cache = self.torch.zeros(LAYERS, 2, B, MAX_LEN, D, device="cuda")  # @site kv_cache
        return self.cache


def decode_step(torch, model, tokens, pos):
    cache = model.ensure_cache()
    x = torch.index_select(model.emb, 0, tokens)  # @site embed
    for layer in range(LAYERS):
        qkv = torch.mm(x, model.wqkv[layer])  # @site qkv
        q, k, v = qkv.split(D, dim=1)
        cache[layer, 0, :, pos].copy_(k)
        cache[layer, 1, :, pos].copy_(v)
        scores = torch.bmm(cache[layer, 0, :, :pos + 1], q.unsqueeze(2))  # @site scores
        probs = torch.softmax(scores, dim=1)  # @site probs
        ctx = torch.bmm(probs.transpose(1, 2), cache[layer, 1, :, :pos + 1]).squeeze(1)  # @site ctx
        x = torch.add(x, torch.mm(ctx, model.wo[layer]))  # @site residual
    logits = torch.mm(x, model.w_out)  # @site logits
    next_tokens = torch.argmax(logits, dim=1)  # @site argmax
    return logits, next_tokens


def serve(torch, model, leak: bool):
    history = []
    allocated = []
    for _ in range(REQUESTS):
        tokens = torch.randint(0, V, (B,), device="cuda")  # @site prompt
        for pos in range(TOKENS):
            logits, tokens = decode_step(torch, model, tokens, pos)
            if leak:
                history.append(logits)  # BUG: every step's logits stay alive
            del logits
            allocated.append(int(torch.cuda.memory_allocated(0)))
    return history, allocated


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--leak", action="store_true", help="keep every step's logits in a list")
    args = ap.parse_args()
    torch = common.require_cuda()

    name = "kv_cache_leak" if args.leak else "kv_cache"
    cap = common.Capture(torch, __file__, name, args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")
    torch.manual_seed(0)
    with torch.inference_mode():
        model = Model(torch)
        history, allocated = serve(torch, model, args.leak)
        snap = cap.snapshot()
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)

    steps = REQUESTS * TOKENS
    deltas = [b - a for a, b in zip(allocated[1:], allocated[2:])]
    per_step = deltas[0] if deltas and all(d == deltas[0] for d in deltas) else None
    logits_bytes = B * V * F32
    cache_bytes = LAYERS * 2 * B * MAX_LEN * D * F32
    trace = snap["device_traces"][0] if isinstance(snap, dict) and snap.get("device_traces") else []
    cache_allocs = sum(1 for e in trace if e.get("action") == "alloc"
                       and common.innermost_python_site(common._frames(e)) == cap.site("kv_cache"))
    top_site = cap.site("logits") if args.leak else cap.site("kv_cache")

    facts = {
        "story": ("leak: history.append(logits) grows live memory by 2 MiB per decode step"
                  if args.leak else "no leak: the KV cache is allocated once and reused; flat after step 0"),
        "variant": "leak" if args.leak else "no_leak",
        "verdict": "leak" if args.leak else "none",
        "steps": steps,
        "requests": REQUESTS,
        "tokens_per_request": TOKENS,
        "bytes_retained_per_step": logits_bytes if args.leak else 0,
        "retained_total_bytes_at_snapshot": logits_bytes * steps if args.leak else 0,
        "leak_site": cap.site("logits") if args.leak else None,
        "kv_cache_site": cap.site("kv_cache"),
        "kv_cache_bytes": cache_bytes,
        "kv_cache_allocations_expected": 1,
        "top_live_site": top_site,
        "top_peak_site": top_site,
        "allocated_bytes_after_each_step": allocated,
        "snapshot_taken": "after the last request, history (if any) alive",
        "sites": cap.sites,
        "notes": "the first mm allocates a 32 MiB cuBLAS workspace (sm90) attributed to the qkv line; it stays live",
    }
    checks = {
        "kv_cache_allocated_once": cache_allocs == 1,
        "kv_cache_live": common.live_at_site(obs, cap.site("kv_cache"))["bytes"] == cache_bytes,
        "top_live_site": (obs["live_by_site"] or [{}])[0].get("site") == top_site,
        "top_peak_site": (obs["peak"]["top_sites_at_peak"] or [{}])[0].get("site") == top_site,
    }
    if args.leak:
        checks["constant_growth_2MiB"] = per_step == logits_bytes
        checks["logits_live_blocks_equal_steps"] = common.live_at_site(obs, cap.site("logits"))["count"] == steps
    else:
        checks["flat_after_first_step"] = bool(deltas) and all(d == 0 for d in deltas)
    del history, model
    sys.exit(cap.finish(facts, obs, checks))


if __name__ == "__main__":
    main()
