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
        # The structured content, serialized, in the second text block (as the spec asks).
        assert len(res.content) == 2, (name, res.content)
        assert json.loads(res.content[1].text) == got, name
        assert json.loads(res.content[1].text) == want, name


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
        ("diff", {"base": "samples/diff_base.pickle", "candidate": "samples/diff_cand.pickle"}),
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
    assert texts[5] == "memlens: top: unknown argument 'color' (it takes 'path', 'at', 'by', 'limit')"
    assert "missing argument 'cand'" in texts[6]
    assert texts[8] == "memlens: diff: unknown argument 'candidate' (did you mean 'cand'?)"


def test_an_unknown_argument_names_the_closest_or_every_one() -> None:
    diff, top = mcp_server.TOOLS["diff"], mcp_server.TOOLS["top"]
    assert mcp_server.unknown_argument(diff, "candidate") == "memlens: diff: unknown argument 'candidate' (did you mean 'cand'?)"
    assert mcp_server.unknown_argument(diff, "frame-depth") == "memlens: diff: unknown argument 'frame-depth' (did you mean 'frame_depth'?)"
    assert mcp_server.unknown_argument(top, "paths") == "memlens: top: unknown argument 'paths' (did you mean 'path'?)"
    assert mcp_server.unknown_argument(top, "zzz") == "memlens: top: unknown argument 'zzz' (it takes 'path', 'at', 'by', 'limit')"
    with pytest.raises(mcp_server.Refused, match=r"did you mean 'cand'\?"):
        mcp_server.run_tool("diff", {"base": "a", "candidate": "b"}, [str(ROOT)])


def test_the_text_blocks_are_the_lines_then_the_json() -> None:
    result = {
        "schema_version": 7,
        "leak": {"state": "found", "why": "judged 6 steps"},
        "sites": [{"site": "a.py:3", "bytes": 1024}],
        "memlens_truncated": [{"path": "/sites", "shown": 1, "total": 4}],
    }
    lines, blob = mcp_server.texts_of("leaks", result)
    assert lines == mcp_server.text_of("leaks", result)
    assert lines.splitlines() == [
        f"memlens leaks: {len(json.dumps(result))} bytes of JSON (structured content, and the next text block)",
        "leak: found: judged 6 steps",
        "cut /sites: 1 of 4",
    ]
    assert json.loads(blob) == result
    assert list(json.loads(blob)) == list(result), "keys in the report's order"


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


@pytest.mark.installed
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


def test_fit_and_oom_tools_give_one_list_of_fixes() -> None:
    """Issue 52's one advice engine, through an agent's client: at each sample's OOM the
    ``fit`` tool's fix ids are the ``oom`` tool's recommendation ids, in the same order (and
    the page's advice, which the CLI test tests/it/advice.rs compares too)."""
    _need_mcp()
    files = ["samples/frag_oom.pickle", "samples/capacity_oom.pickle", "samples/no_optimizer_state.pickle"]
    calls: List[Tuple[str, Dict[str, Any]]] = [(tool, {"path": f}) for f in files for tool in ("oom", "fit")]
    _, results = _session(calls, str(ROOT))
    for k, f in enumerate(files):
        oom, fit = results[2 * k], results[2 * k + 1]
        assert not oom.is_error and not fit.is_error, (f, oom.content, fit.content)
        first = oom.structured_content["ooms"][0]
        recs = [r["id"] for r in first["recommendations"]]
        device = [d for d in fit.structured_content["devices"] if d["device"] == first["device"]]
        assert len(device) == 1, f
        assert device[0]["moment"] == "oom", f
        fixes = [x["id"] for x in device[0]["fixes"]]
        assert recs, f
        assert fixes == recs, (f, fixes, recs)


def _call_in_time(fn: Any, seconds: float) -> Any:
    """``fn()`` in a thread, failed (and the server's session killed) past ``seconds``: a hung
    call fails the test rather than wedging the run."""
    import threading

    box: Dict[str, Any] = {}

    def go() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            box["error"] = e

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        proc = mcp_server._SESSION._proc
        if proc is not None:
            proc.kill()
        pytest.fail(f"a call hung for {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _without_file(report: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in report.items() if k != "file"}


def _swap_races(tmp_path: Path, other: str, seconds: float) -> Tuple[int, int, List[Dict[str, Any]]]:
    """Calls ``summary`` on ``allowed/x.pickle`` for ``seconds`` while a thread swaps that name
    (atomically, ``rename``) between the allowed snapshot and ``other``: ``link`` (a symbolic
    link to a snapshot outside ``--allow``) or ``fifo`` (a FIFO). Returns (races, refusals,
    results)."""
    import threading
    import time

    allowed, stage, outside = tmp_path / "allowed", tmp_path / "stage", tmp_path / "outside"
    for d in (allowed, stage, outside):
        d.mkdir()
    inside_copy = stage / "inside.pickle"
    inside_copy.write_bytes((SAMPLES / "train_small.pickle").read_bytes())
    secret = outside / "secret.pickle"
    secret.write_bytes((SAMPLES / "frag_oom.pickle").read_bytes())
    target = allowed / "x.pickle"
    os.link(inside_copy, target)
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        while not stop.is_set():
            tmp = stage / "next"
            if swaps[0] % 2 == 0:
                if other == "link":
                    os.symlink(secret, tmp)
                else:
                    os.mkfifo(tmp)
            else:
                os.link(inside_copy, tmp)
            os.replace(tmp, target)
            swaps[0] += 1

    allow = [os.path.realpath(allowed)]
    t = threading.Thread(target=swapper, daemon=True)
    t.start()
    races = refusals = 0
    results: List[Dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            races += 1
            try:
                results.append(_call_in_time(lambda: mcp_server.run_tool("summary", {"path": str(target)}, allow), 30))
            except mcp_server.Refused as e:
                refusals += 1
                assert str(e).startswith("memlens") and "\n" not in str(e), e
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 100, swaps
    return races, refusals, results


def test_a_symlink_swapped_in_never_reads_outside_allow(tmp_path: Path) -> None:
    """The file is opened once and the opened file is what is checked and read: swapping the
    name for a symbolic link to a file outside ``--allow`` while calls are made (thousands of
    races) reads the outside file 0 times."""
    races, refusals, results = _swap_races(tmp_path, "link", 8.0)
    inside = _without_file(memlens.analyze("summary", SAMPLES / "train_small.pickle"))
    outside = _without_file(memlens.analyze("summary", SAMPLES / "frag_oom.pickle"))
    assert inside != outside
    read_outside = sum(1 for r in results if _without_file(r) == outside)
    assert read_outside == 0, f"{read_outside} of {races} calls read outside --allow"
    assert all(_without_file(r) == inside for r in results)
    assert races >= 300 and results and refusals, (races, len(results), refusals)


def test_a_fifo_swapped_in_is_refused_and_never_hangs(tmp_path: Path) -> None:
    """A FIFO swapped in for the file is refused before a byte is read (opened without
    blocking, checked with ``fstat``): no call waits, and the calls after it are answered."""
    races, refusals, results = _swap_races(tmp_path, "fifo", 4.0)
    inside = _without_file(memlens.analyze("summary", SAMPLES / "train_small.pickle"))
    assert all(_without_file(r) == inside for r in results)
    assert races >= 100 and results and refusals, (races, len(results), refusals)


@pytest.mark.installed
def test_the_binary_never_imports_packages_of_its_working_directory(tmp_path: Path) -> None:
    """``memlens mcp`` started where an ``mcp/`` and a ``memlens/`` package lie (a checkout the
    agent works in) starts the real server and never imports them (Python runs isolated)."""
    _need_mcp()
    marker = tmp_path / "imported"
    for name in ("mcp", "memlens"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\nraise SystemExit('shadowed {name}')\n"
        )
    binary = memlens.find_memlens_bin()

    async def go() -> Tuple[Any, Any]:
        params = StdioServerParameters(
            command=str(binary), args=["mcp", "--allow", str(ROOT)], env=subprocess_env(), cwd=str(tmp_path)
        )
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                tools = await s.list_tools()
                res = await s.call_tool("summary", {"path": str(SAMPLES / "train_small.pickle")})
                return tools, res

    tools, res = asyncio.run(asyncio.wait_for(go(), 120))
    assert not marker.exists(), marker.read_text()
    assert sorted(t.name for t in tools.tools) == sorted(mcp_server.TOOLS)
    assert not res.is_error, res.content
    assert res.structured_content == memlens.analyze("summary", SAMPLES / "train_small.pickle")


def test_a_session_that_dies_is_a_tool_error(tmp_path: Path) -> None:
    """A session that ends (here a binary that exits at once) is a tool error with memlens's
    one line, not a JSON-RPC error with a traceback; and so is a path refused mid-check."""
    _need_mcp()
    dead = tmp_path / "memlens"
    dead.write_text("#!/bin/sh\nexit 3\n")
    dead.chmod(0o755)

    async def go() -> List[Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memlens", "mcp", "--allow", str(ROOT)],
            env=subprocess_env(MEMLENS_BIN=str(dead)),
            cwd=str(ROOT),
        )
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                return [
                    await s.call_tool("summary", {"path": "samples/train_small.pickle"}),
                    await s.call_tool("top", {"path": "samples/frag_oom.pickle"}),
                ]

    for res in asyncio.run(asyncio.wait_for(go(), 120)):
        assert res.is_error, res
        text = res.content[0].text
        assert text.startswith("memlens: the session ended"), text
        assert "\n" not in text and "Traceback" not in text, text

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


def test_every_judgement_reaches_the_tool_and_its_text() -> None:
    """The leaks (each kind of growth), categories and fit (capacity) tools carry the CLI's
    judgements, and the text a client shows says each in the CLI's words: "cannot judge: WHY;
    record WHAT" where the file cannot tell, never a bare count of bytes of JSON."""
    allow = [os.path.realpath(SAMPLES)]
    r = mcp_server.run_tool("leaks", {"path": str(SAMPLES / "retained_graph.pickle")}, allow)
    cli = memlens.analyze("leaks", SAMPLES / "retained_graph.pickle")
    assert (r["leak"]["state"], r["retained_graph"]["state"]) == ("none", "found")
    assert (r["leak"], r["retained_graph"]) == (cli["leak"], cli["retained_graph"])
    text = mcp_server.text_of("leaks", r).splitlines()
    assert f"retained graph: found: {cli['retained_graph']['why']}" in text, text
    assert f"leak: none: {cli['leak']['why']}" in text, text

    r = mcp_server.run_tool("categories", {"path": str(SAMPLES / "state_only.pickle")}, allow)
    j = r["judgement"]
    assert j == memlens.analyze("categories", SAMPLES / "state_only.pickle")["judgement"]
    assert j["state"] == "cannot_judge" and j["record"], j
    assert f"judgement: cannot judge: {j['why']}; record {j['record']}" in mcp_server.text_of("categories", r)

    r = mcp_server.run_tool("fit", {"path": str(SAMPLES / "train_small.pickle")}, allow)
    cap = r["devices"][0]["capacity"]
    assert cap["state"] == "cannot_judge" and r["devices"][0]["plan"] is None, cap
    assert f"device 0 capacity: cannot judge: {cap['why']}; record {cap['record']}" in mcp_server.text_of("fit", r)
