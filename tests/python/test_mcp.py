"""``python -m memlens mcp`` driven by the official MCP Python client (``mcp`` on PyPI): the
tools listed with their schemas, each tool called on a sample and its result checked against
the CLI's JSON (bounded the same way) and against its output schema, the bounds, and every
refusal a tool error with memlens's one line. Needs ``mcp`` (Python 3.10+): required under CI.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from conftest import ROOT, require, subprocess_env

import memlens
from memlens import mcp_server

try:
    import jsonschema  # the MCP SDK depends on it
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    HAVE_MCP = True
except ImportError:  # pragma: no cover
    HAVE_MCP = False

SAMPLES = ROOT / "samples"

# (tool, arguments, the CLI call the result must equal: (command, positionals, flags)).
CALLS: List[Tuple[str, Dict[str, Any], Tuple[str, List[str], Dict[str, Any]]]] = [
    ("summary", {"path": "samples/train_small.pickle"}, ("summary", ["samples/train_small.pickle"], {})),
    ("top", {"path": "samples/diff_cand.pickle", "at": "end", "limit": 3}, ("top", ["samples/diff_cand.pickle"], {"at": "end", "n": 3})),
    ("oom", {"path": "samples/frag_oom.pickle"}, ("oom", ["samples/frag_oom.pickle"], {"sites": 20})),
    ("explain", {"message": "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free. Of the allocated memory 70.11 GiB is allocated by PyTorch, and 6.30 GiB is reserved by PyTorch but unallocated."}, ("explain", [], {})),
    ("fit", {"path": "samples/frag_oom.pickle"}, ("fit", ["samples/frag_oom.pickle"], {})),
    ("whatif", {"path": "samples/frag_oom.pickle", "set": ["expandable_segments:True"]}, ("whatif", ["samples/frag_oom.pickle"], {"set": ["expandable_segments:True"]})),
    ("diff", {"base": "samples/diff_base.pickle", "cand": "samples/diff_cand.pickle"}, ("diff", ["samples/diff_base.pickle", "samples/diff_cand.pickle"], {"n": 20})),
    ("check", {"path": "samples/train_small.pickle", "max_peak": "1MiB"}, ("check", ["samples/train_small.pickle"], {"max_peak": "1MiB"})),
    ("leaks", {"path": "samples/retained_graph.pickle"}, ("leaks", ["samples/retained_graph.pickle"], {})),
    ("categories", {"path": "samples/adam_loop.pickle", "at": "peak"}, ("categories", ["samples/adam_loop.pickle"], {"at": "peak"})),
]


def _session(calls: List[Tuple[str, Dict[str, Any]]], allow: str) -> Tuple[Any, List[Any]]:
    """Starts the server as a client would, lists its tools and makes ``calls``."""

    async def go() -> Tuple[Any, List[Any]]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memlens", "mcp", "--allow", allow],
            env=subprocess_env(),
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                tools = await s.list_tools()
                results = [await s.call_tool(name, args) for name, args in calls]
                return tools, results

    return asyncio.run(go())


def _need_mcp() -> None:
    require(HAVE_MCP, "the mcp package (pip install 'memlens[mcp]') is not installed")


def test_every_tool_answers_as_the_cli_does_within_its_schema() -> None:
    _need_mcp()
    tools, results = _session([(n, a) for n, a, _ in CALLS], str(ROOT))
    listed = {t.name: t for t in tools.tools}
    assert sorted(listed) == sorted(mcp_server.TOOLS), sorted(listed)
    for name, t in listed.items():
        assert t.input_schema["type"] == "object" and t.input_schema["additionalProperties"] is False
        assert set(t.input_schema["required"]) <= set(t.input_schema["properties"])
        assert t.output_schema == mcp_server.output_schema(name)
        assert t.description
    for (name, args, (cmd, pos, flags)), res in zip(CALLS, results):
        assert not res.is_error, (name, res.content)
        got = res.structured_content
        want, cut = mcp_server.bound(memlens.analyze(cmd, *[ROOT / p for p in pos] if pos else [args.get("message", "")], **flags), int(args.get("limit", 20)))
        if cut:
            want["memlens_truncated"] = cut
        assert got == want, name
        jsonschema.validate(got, mcp_server.output_schema(name))
        text = res.content[0].text
        assert text.startswith(f"memlens {name}: "), text


def test_results_are_bounded() -> None:
    _need_mcp()
    args = {"base": "samples/train_small.pickle", "cand": "samples/diff_cand.pickle", "limit": 2}
    _, (res,) = _session([("diff", args)], str(ROOT))
    got = res.structured_content

    def lists(v: Any) -> List[List[Any]]:
        if isinstance(v, dict):
            return [x for k, y in v.items() if k != "memlens_truncated" for x in lists(y)]
        if isinstance(v, list):
            return [v] + [x for y in v for x in lists(y)]
        return []

    assert all(len(x) <= 2 for x in lists(got)), got
    full = memlens.analyze("diff", SAMPLES / "train_small.pickle", SAMPLES / "diff_cand.pickle")
    total = len(full["sites"])
    assert total > 2
    assert {"path": "/sites", "shown": 2, "total": total} in got["memlens_truncated"]
    assert "cut /sites: 2 of %d" % total in res.content[0].text


def test_refusals_are_tool_errors_with_memlens_line(tmp_path: Path) -> None:
    _need_mcp()
    outside = tmp_path / "snap.pickle"
    outside.write_bytes((SAMPLES / "train_small.pickle").read_bytes())
    calls: List[Tuple[str, Dict[str, Any]]] = [
        ("summary", {"path": str(outside)}),
        ("summary", {"path": "samples/no_such.pickle"}),
        ("summary", {"path": "samples/README.md"}),
        ("top", {"path": "samples/train_small.pickle", "at": "nowhere"}),
        ("top", {"path": "samples/train_small.pickle", "limit": "3"}),
        ("top", {"path": "samples/train_small.pickle", "color": "red"}),
        ("diff", {"base": "samples/diff_base.pickle"}),
        ("nope", {}),
    ]
    _, results = _session(calls, str(ROOT))
    for (name, args), res in zip(calls, results):
        assert res.is_error, (name, args)
        text = res.content[0].text
        assert text.startswith("memlens"), text
        assert "\n" not in text, text
    texts = [r.content[0].text for r in results]
    assert "outside the directories" in texts[0]
    assert "not a regular file" in texts[1]
    assert texts[2] == memlens_error_line("summary", SAMPLES / "README.md")
    assert "unknown argument 'color'" in texts[5]
    assert "missing argument 'cand'" in texts[6]


def memlens_error_line(cmd: str, path: Path) -> str:
    try:
        memlens.analyze(cmd, path)
    except memlens.MemlensError as e:
        return str(e).strip().splitlines()[0]
    raise AssertionError("expected a refusal")


def test_the_server_reads_only_inside_allow(tmp_path: Path) -> None:
    _need_mcp()
    link = tmp_path / "link.pickle"
    os.symlink(SAMPLES / "train_small.pickle", link)
    with pytest.raises(mcp_server.Refused, match="outside the directories"):
        mcp_server.run_tool("summary", {"path": str(link)}, [str(tmp_path / "elsewhere")])
    ok = mcp_server.run_tool("summary", {"path": str(link)}, [os.path.realpath(SAMPLES)])
    assert ok["schema_version"] == 1
    assert json.dumps(ok)


def test_the_binary_starts_the_same_server() -> None:
    """``memlens mcp`` (the binary) starts this package's server: the same tools, one answer."""
    _need_mcp()
    binary = memlens.find_memlens_bin()

    async def go() -> Tuple[Any, Any]:
        params = StdioServerParameters(
            command=str(binary),
            args=["mcp", "--allow", str(ROOT)],
            env=subprocess_env(),
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                tools = await s.list_tools()
                res = await s.call_tool("summary", {"path": "samples/train_small.pickle"})
                return tools, res

    tools, res = asyncio.run(go())
    assert sorted(t.name for t in tools.tools) == sorted(mcp_server.TOOLS)
    assert not res.is_error
    assert res.structured_content == memlens.analyze("summary", SAMPLES / "train_small.pickle")


def test_tool_arguments_are_the_commands_flags() -> None:
    """Every tool argument but the files, the message and ``limit`` is a flag of its command
    (``memlens COMMAND --help``, the generated ``OPTIONS`` table), so the tools follow the CLI."""
    from memlens._options import OPTIONS

    for name, tool in mcp_server.TOOLS.items():
        own = set(tool.properties) - {"path", "base", "cand", "message", "limit"}
        assert own <= OPTIONS[name], (name, own - OPTIONS[name])


def test_the_server_decodes_each_file_once() -> None:
    """The tools share one session: three tools on one file, one decode."""
    allow = [os.path.realpath(SAMPLES)]
    before = mcp_server._SESSION.decodes
    for name in ("summary", "top", "oom"):
        mcp_server.run_tool(name, {"path": str(SAMPLES / "capacity_oom.pickle")}, allow)
    assert mcp_server._SESSION.decodes == before + 1


def test_leaks_tool_carries_the_judgement() -> None:
    """The leaks tool's result says "cannot judge" (why, what to record) where the trace holds
    one backward pass and no step, "none" where steps were judged, as the CLI's JSON does."""
    allow = [os.path.realpath(SAMPLES)]
    for name, state in (("backward_layers.pickle", "cannot_judge"), ("kv_cache.pickle", "none")):
        r = mcp_server.run_tool("leaks", {"path": str(SAMPLES / name)}, allow)
        assert r["judgement"] == memlens.analyze("leaks", SAMPLES / name)["judgement"], name
        assert r["judgement"]["state"] == state, name
        assert all(d["judgement"]["state"] == state for d in r["devices"]), name
    assert r["findings"] == []
