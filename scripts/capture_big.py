#!/usr/bin/env python3
"""Writes one large real snapshot (hundreds of MB) from a training loop, for the benchmark.

    python3 scripts/capture_big.py --out /tmp/real-big.pickle [--seconds 40] [--max-entries 3000000]

Nothing it writes is committed: it exists to time memlens on the layout PyTorch itself writes
(`torch.cuda.memory._dump_snapshot`, Python stacks through nested nn.Modules, 20-40 frames per
event) next to the generated `big` files. It trains a small MLP of nested `nn.Sequential`s
for --seconds with allocator history on, keeping the last --max-entries events, then dumps.
Without CUDA it exits 3 with one line.
"""
import argparse
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--max-entries", type=int, default=3_000_000)
    ap.add_argument("--depth", type=int, default=8, help="nesting of nn.Sequential (3 frames each)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as exc:
        print(f"capture_big: torch is not importable ({exc})", file=sys.stderr)
        sys.exit(3)
    if not torch.cuda.is_available():
        print("capture_big: CUDA is not available; run on a GPU machine", file=sys.stderr)
        sys.exit(3)

    def block(depth):
        if depth == 0:
            return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU())
        return torch.nn.Sequential(block(depth - 1), torch.nn.LayerNorm(256), block(depth - 1))

    model = block(args.depth // 2).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=args.max_entries)
    t0 = time.time()
    steps = 0
    while time.time() - t0 < args.seconds:
        x = torch.randn(64, 256, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps += 1
    torch.cuda.synchronize()
    t1 = time.time()
    torch.cuda.memory._dump_snapshot(args.out)
    t2 = time.time()
    torch.cuda.memory._record_memory_history(enabled=None)
    size = os.path.getsize(args.out)
    print(f"capture_big: torch {torch.__version__}, {steps} steps in {t1 - t0:.1f} s, "
          f"_dump_snapshot {t2 - t1:.1f} s, {size} bytes ({size / 1e6:.0f} MB)", flush=True)


if __name__ == "__main__":
    main()
