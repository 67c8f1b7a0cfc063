#!/usr/bin/env python3
"""Capture 7: one snapshot object pickled with protocols 4 and 5.

A small workload (a few tensors of mixed sizes, one freed, small and large pool),
then ``snap = torch.cuda.memory._snapshot()`` once and
``pickle.dump(snap, f, protocol=p)`` for p = 4 and 5.  Both files hold the same
object; protocol 5 output is expected to be byte-identical except the PROTO
argument byte (snapshots carry no out-of-band buffers) -- the script checks and
records that.  For reference it also writes ``protocol_default.pickle`` with
``torch.cuda.memory._dump_snapshot`` (Python's default protocol; a *second*
snapshot call, so its trace additionally holds the ``snapshot`` marker of the first).

Outputs: ``protocol4.pickle``, ``protocol5.pickle``, ``protocol_default.pickle``,
``protocols.truth.json``.
"""

import os
import pickle
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB


def workload(torch):
    keep = []
    keep.append(torch.empty(3 * 1024, dtype=torch.uint8, device="cuda"))  # @site small
    keep.append(torch.empty(1536 * 1024, dtype=torch.uint8, device="cuda"))  # @site medium
    keep.append(torch.empty(24 * MiB, dtype=torch.uint8, device="cuda"))  # @site large
    tmp = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")  # @site freed
    del tmp
    return keep


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    args = ap.parse_args()
    torch = common.require_cuda()

    cap = common.Capture(torch, __file__, "protocols", args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")
    keep = workload(torch)
    snap = cap.snapshot()
    p4 = cap.dump(snap, "protocol4.pickle", protocol=4)
    p5 = cap.dump(snap, "protocol5.pickle", protocol=5)
    default_path = os.path.join(args.out, "protocol_default.pickle")
    torch.cuda.memory._dump_snapshot(default_path)
    cap.snapshots.append({"file": "protocol_default.pickle", "protocol": "python default via _dump_snapshot",
                          "bytes": os.path.getsize(default_path)})
    cap.stop()

    with open(p4, "rb") as f:
        b4 = f.read()
    with open(p5, "rb") as f:
        b5 = f.read()
    with open(default_path, "rb") as f:
        bd = f.read()
    diff_at = [i for i in range(min(len(b4), len(b5))) if b4[i] != b5[i]]
    obs = common.summarize_snapshot(snap)
    facts = {
        "story": "the same snapshot object pickled with protocol 4 and protocol 5",
        "verdict": "none",
        "files": {"protocol4.pickle": 4, "protocol5.pickle": 5,
                  "protocol_default.pickle": bd[1] if len(bd) > 1 and bd[0] == 0x80 else None},
        "same_object": True,
        "expected_identical_except_proto_byte": True,
        "sha256": {"protocol4.pickle": common.sha256_file(p4), "protocol5.pickle": common.sha256_file(p5)},
        "python_default_protocol": pickle.DEFAULT_PROTOCOL,
        "sites": cap.sites,
    }
    observed = dict(obs)
    observed["byte_diff_offsets"] = diff_at[:16]
    observed["lengths"] = {"protocol4.pickle": len(b4), "protocol5.pickle": len(b5),
                           "protocol_default.pickle": len(bd)}
    checks = {
        "proto_bytes": b4[:2] == b"\x80\x04" and b5[:2] == b"\x80\x05",
        "loads_equal": pickle.loads(b4) == pickle.loads(b5),
        "identical_except_proto_byte": len(b4) == len(b5) and diff_at == [1],
        "default_file_loads": isinstance(pickle.loads(bd), dict),
    }
    del keep
    sys.exit(cap.finish(facts, observed, checks))


if __name__ == "__main__":
    main()
