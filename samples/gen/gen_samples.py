#!/usr/bin/env python3
"""Deterministic generator of synthetic PyTorch CUDA memory snapshots (stdlib only).

  python3 samples/gen/gen_samples.py
      regenerate every small sample into samples/ (byte-identical on every run)
  python3 samples/gen/gen_samples.py big --size-mb 500 --out PATH [--layout shared|fresh|torch|memo|cpp] [--protocol 4|2]
                                           [--entries N (instead of --size-mb)]
      write a large benchmark snapshot (training-style trace, consistent final segments)
  python3 samples/gen/gen_samples.py deep --entries 200000 --out PATH [--frames 1000] [--size 4096]
                                          [--extra N --extra-size BYTES]
      write entries that all share one deep stack (memgen/deep.py)
  python3 samples/gen/gen_samples.py streams --entries 300000 --out PATH [--streams 65535]
      write entries spread over many distinct streams, one segment each (memgen/streams.py)
  python3 samples/gen/gen_samples.py layouts [--entries 300]
      write one small file per benchmark layout (a 2-layer model) into samples/layouts/ (shared, protocol 2,
      fresh, torch, memo, cpp; and torch_batches, 3,500 entries in several batches, where a split pass 1
      starts regions): the parallel and fast-path tests read every layout

See samples/README.md for what each sample contains.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep samples/gen free of __pycache__

from memgen import (annotations, findings, frames2026, lines, newer, pools, scenarios,  # noqa: E402
                    settings2026, truth, writers)

SAMPLES_DIR = os.path.normpath(os.path.join(HERE, ".."))


def generate_small(out_dir=SAMPLES_DIR, verbose=True):
    written = []
    for name, kind, fn in scenarios.SMALL_SAMPLES:
        path = os.path.join(out_dir, name)
        if kind == "cpp":
            obj, held = fn()
            writers.write_cpp_pickle(obj, path, held)
        else:
            obj = fn()
            writers.write_python_pickle(obj, path, protocol=4)
        written.append(path)
        if name == "train_small.pickle":
            jpath = os.path.join(out_dir, "snapshot.json")
            writers.write_json(obj, jpath)
            written.append(jpath)
    written += generate_findings(out_dir)
    written += generate_newer(out_dir)
    written += generate_keyed(out_dir, frames2026.FRAMES_SAMPLES, "frames2026")
    written += generate_keyed(out_dir, settings2026.SETTINGS_SAMPLES, "settings2026")
    written += generate_keyed(out_dir, annotations.ANNOTATION_SAMPLES, "annotations")
    written += generate_keyed(out_dir, pools.POOLS_SAMPLES, "pools")
    written += generate_keyed(out_dir, lines.LINES_SAMPLES, "lines")
    if verbose:
        for p in written:
            print("%8d  %s" % (os.path.getsize(p), os.path.relpath(p)))
    return written


def generate_findings(out_dir=SAMPLES_DIR):
    """Scenario samples with known answers: samples/<name>.pickle (+ ranks/) and samples/truth/<name>.json."""
    written = []
    os.makedirs(os.path.join(out_dir, "truth"), exist_ok=True)
    for name, path, fn in findings.FINDING_SAMPLES:
        objs, facts = fn()
        if path is not None:
            objs = {path: objs}
        for rel in sorted(objs):
            p = os.path.join(out_dir, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            writers.write_python_pickle(objs[rel], p, protocol=4)
            written.append(p)
        tp = os.path.join(out_dir, "truth", name + ".json")
        truth.write_truth(facts, tp)
        written.append(tp)
    return written


def generate_newer(out_dir=SAMPLES_DIR):
    """What newer PyTorch writes (memgen/newer.py): samples/<name> and their facts in
    samples/truth/newer.json, keyed by file name."""
    return generate_keyed(out_dir, newer.NEWER_SAMPLES, "newer")


def generate_keyed(out_dir, samples, truth_name):
    """Samples of one memgen module: samples/<name> and their facts in
    samples/truth/<truth_name>.json, keyed by file name."""
    written = []
    facts = {}
    for name, kind, fn in samples:
        obj, f = fn()
        path = os.path.join(out_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "json":
            writers.write_json(obj, path)
        else:
            writers.write_python_pickle(obj, path, protocol=4)
        facts[name] = f
        written.append(path)
    os.makedirs(os.path.join(out_dir, "truth"), exist_ok=True)
    tp = os.path.join(out_dir, "truth", truth_name + ".json")
    truth.write_truth(facts, tp)
    written.append(tp)
    return written


# The benchmark layouts of memgen/big.py, small (samples/layouts): file, layout, protocol, and
# trace entries when not --entries (torch_batches: several batches of 1000 entries, where a split
# pass 1 can start its regions).
LAYOUT_FILES = [
    ("shared.pickle", "shared", 4, None),
    ("shared_p2.pickle", "shared", 2, None),
    ("fresh.pickle", "fresh", 4, None),
    ("torch.pickle", "torch", 4, None),
    ("memo.pickle", "memo", 4, None),
    ("cpp.pickle", "cpp", 2, None),
    ("torch_batches.pickle", "torch", 4, 3500),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    sm = sub.add_parser("small", help="regenerate the small samples (default)")
    sm.add_argument("--out-dir", default=SAMPLES_DIR)
    bg = sub.add_parser("big", help="write a large benchmark snapshot")
    bg.add_argument("--size-mb", type=float, default=500.0)
    bg.add_argument("--out", required=True)
    bg.add_argument("--layout", choices=("shared", "fresh", "torch", "memo", "cpp"), default="shared")
    bg.add_argument("--protocol", type=int, choices=(2, 4), default=4)
    bg.add_argument("--entries", type=int, default=None, help="about this many trace entries instead of --size-mb")
    bg.add_argument("--seed", type=int, default=11)
    ly = sub.add_parser("layouts", help="write one small file per benchmark layout (samples/layouts)")
    ly.add_argument("--out-dir", default=os.path.join(SAMPLES_DIR, "layouts"))
    ly.add_argument("--entries", type=int, default=300)
    dp = sub.add_parser("deep", help="write entries sharing one deep stack (memgen/deep.py)")
    dp.add_argument("--entries", type=int, default=200000)
    dp.add_argument("--size", type=int, default=4096, help="bytes of each allocation")
    dp.add_argument("--frames", type=int, default=1000)
    dp.add_argument("--extra", type=int, default=0, help="allocations at a second site")
    dp.add_argument("--extra-size", type=int, default=4096)
    dp.add_argument("--out", required=True)
    sp = sub.add_parser("streams", help="write entries spread over many streams (memgen/streams.py)")
    sp.add_argument("--entries", type=int, default=300000)
    sp.add_argument("--streams", type=int, default=65535, help="distinct non-default stream handles")
    sp.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "streams":
        from memgen import streams
        size = streams.write_streams(args.out, args.entries, args.streams)
        print("%s %d bytes (%.1f MB)" % (args.out, size, size / 1e6))
        return 0
    if args.cmd == "deep":
        from memgen import deep
        size = deep.write_deep(args.out, args.entries, args.size, args.frames, args.extra, args.extra_size)
        print("%s %d bytes (%.1f MB)" % (args.out, size, size / 1e6))
        return 0
    if args.cmd == "layouts":
        from memgen import big
        os.makedirs(args.out_dir, exist_ok=True)
        for name, layout, protocol, entries in LAYOUT_FILES:
            path = os.path.join(args.out_dir, name)
            size = big.write_big(path, 0, layout=layout, protocol=protocol, entries=entries or args.entries,
                                 layers=2, log=open(os.devnull, "w"))
            print("%s %d bytes" % (path, size))
        return 0
    if args.cmd == "big":
        from memgen import big
        t0 = time.time()
        size = big.write_big(args.out, args.size_mb, layout=args.layout, protocol=args.protocol, seed=args.seed,
                             entries=args.entries)
        print("%s %d bytes (%.1f MB) in %.1f s" % (args.out, size, size / 1e6, time.time() - t0))
        return 0
    generate_small(getattr(args, "out_dir", SAMPLES_DIR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
