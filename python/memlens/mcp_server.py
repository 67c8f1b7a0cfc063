"""``python -m memlens mcp``: memlens's analyses as tools for coding agents (Model Context
Protocol over stdio), built on the official ``mcp`` SDK (``pip install memlens[mcp]``).

Tools: ``summary``, ``top``, ``oom``, ``explain``, ``fit``, ``whatif``, ``diff``, ``check``,
``leaks``, ``categories``. Each asks one ``memlens session`` (kept for the server's life, so
every file is decoded once whichever tools ask) for the command's ``--format json`` and
returns that report as structured content, valid against the command's published schema
(``docs/schemas/``, shipped in the package and declared as the tool's output schema), with a
short text rendering and the JSON serialized beside it (two text blocks). What a tool returns is bounded so an agent's context is not
flooded: every list is cut to ``limit`` items (sites, rows; 20 by default, at most 200),
every stack to 12 frames, every string to 400 characters; what was cut is listed in
``memlens_truncated`` (``{path, shown, total}``), and ``limit`` brings more.

Only files the client names are read, and only inside the directories the server was started
with (``--allow DIR``, repeatable; the current directory by default): each file is opened once
(:func:`open_allowed`: walked without following links or blocking, the opened file checked)
and the session reads that open file, never the path again. A path outside them, a missing
file, a FIFO or device, a path changed while it was opened, anything memlens refuses, or a
session that died is a tool error whose text is memlens's one line. Nothing is written.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import stat
import sys
from importlib import resources
from typing import Any, Callable, Sequence

from ._api import command_line
from ._errors import MemlensError
from ._notebook import _Session, judgement_words

# One `memlens session` for the server's life: every file is decoded once, whichever tools ask.
_SESSION = _Session()

__all__ = ["TOOLS", "bound", "error_line", "main", "open_allowed", "run_tool"]

# Bounds of every structured result.
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
STACK_FRAMES = 12
STRING_CHARS = 400

_PATH = {"type": "string", "description": "A snapshot file (pickle, gzip, zstd or JSON)."}
_LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_LIMIT,
    "description": f"Most items of any list in the result (default {DEFAULT_LIMIT}).",
}
_AT = {
    "type": "string",
    "description": "The moment: peak, end, start, oom, oom:K, step:N, time:12.5s, or an event index.",
}
_CAPACITY = {"type": "string", "description": "GPU capacity, e.g. 80GiB."}
_GPU = {"type": "string", "description": "GPU model instead of capacity, e.g. h100, a100-80."}


class Tool:
    """One tool: its name, words, input properties (required ones first), the memlens command
    it runs and how its arguments become that command's positional arguments and flags."""

    def __init__(
        self,
        name: str,
        description: str,
        properties: dict[str, dict[str, Any]],
        required: Sequence[str],
        paths: Sequence[str] = ("path",),
        flags: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.properties = dict(properties, limit=_LIMIT)
        self.required = list(required)
        self.paths = list(paths)
        self.flags = flags or (
            lambda a: {k: v for k, v in a.items() if k not in self.paths and k != "limit"}
        )

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments."""
        return {
            "type": "object",
            "properties": self.properties,
            "required": self.required,
            "additionalProperties": False,
        }


def _top_flags(a: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in a.items() if k in ("at", "by")}
    out["n"] = a.get("limit", DEFAULT_LIMIT)
    return out


def _diff_flags(a: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in a.items() if k in ("at", "frame_depth", "ignore_lines")}
    out["n"] = a.get("limit", DEFAULT_LIMIT)
    return out


def _oom_flags(a: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in a.items() if k in ("capacity", "gpu")}
    out["sites"] = a.get("limit", DEFAULT_LIMIT)
    return out


def _only(*keys: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda a: {k: v for k, v in a.items() if k in keys}


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool(
            "summary",
            "Per device: reserved, allocated and requested bytes, rounding waste, pools, trace counts, allocator settings, warnings.",
            {"path": _PATH},
            ["path"],
            flags=_only(),
        ),
        Tool(
            "top",
            "Where the memory is at a moment: live bytes per call site (or stack, file, function), biggest first.",
            {"path": _PATH, "at": _AT, "by": {"type": "string", "enum": ["site", "stack", "file", "function"]}},
            ["path"],
            flags=_top_flags,
        ),
        Tool(
            "oom",
            "Every out-of-memory event: its four numbers, the cause (capacity, fragmentation, another process), and what to change first.",
            {"path": _PATH, "capacity": _CAPACITY, "gpu": _GPU},
            ["path"],
            flags=_oom_flags,
        ),
        Tool(
            "explain",
            "Read a CUDA out-of-memory error message alone: its numbers, the verdict and the fixes, cheapest first.",
            {"message": {"type": "string", "description": "The error message."}, "capacity": _CAPACITY, "gpu": _GPU},
            ["message"],
            paths=(),
            flags=_only("capacity", "gpu"),
        ),
        Tool(
            "fit",
            "What the memory is made of at the OOM (or peak), the fixes with the bytes each saves, and the shortest list that fits.",
            {"path": _PATH, "at": _AT, "capacity": _CAPACITY, "gpu": _GPU},
            ["path"],
            flags=_only("at", "capacity", "gpu"),
        ),
        Tool(
            "whatif",
            "Replay the recorded requests through the caching allocator under other settings: peak reserved, OOMs avoided.",
            {
                "path": _PATH,
                "set": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Scenarios as PYTORCH_CUDA_ALLOC_CONF writes them, e.g. expandable_segments:True.",
                },
                "suggest": {"type": "boolean", "description": "Also try the standard settings."},
                "capacity": _CAPACITY,
                "gpu": _GPU,
            },
            ["path"],
            flags=_only("set", "suggest", "capacity", "gpu"),
        ),
        Tool(
            "diff",
            "Compare two runs: peak, reserved, fragmentation, categories and sites that changed, allocator settings, steps side by side, where the runs part, observations.",
            {
                "base": _PATH,
                "cand": _PATH,
                "at": _AT,
                "frame_depth": {"type": "integer", "minimum": 0, "maximum": 8},
                "ignore_lines": {"type": "boolean"},
            },
            ["base", "cand"],
            paths=("base", "cand"),
            flags=_diff_flags,
        ),
        Tool(
            "check",
            "Hold a snapshot to budgets (peak, fragmentation, reserved share, leaked bytes): each budget passed, broken (with its top sites) or not measured.",
            {
                "path": _PATH,
                "max_peak": {"type": "string", "description": "e.g. 40GiB"},
                "max_frag": {"type": "string", "description": "e.g. 30%"},
                "max_reserved": {"type": "string", "description": "e.g. 90% (needs capacity or gpu)"},
                "max_leaked": {"type": "string", "description": "e.g. 1GiB"},
                "capacity": _CAPACITY,
                "gpu": _GPU,
            },
            ["path"],
            flags=_only("max_peak", "max_frag", "max_reserved", "max_leaked", "capacity", "gpu"),
        ),
        Tool(
            "leaks",
            "Memory that grows step after step: leaks and retained autograd graphs, each with its cause and the line that keeps it.",
            {"path": _PATH},
            ["path"],
            flags=_only(),
        ),
        Tool(
            "categories",
            "Live bytes by kind at a moment: parameters, optimizer state, gradients, activations, KV cache, temporaries, with the rules that matched.",
            {"path": _PATH, "at": _AT},
            ["path"],
            flags=_only("at"),
        ),
    ]
}


def output_schema(name: str) -> dict[str, Any]:
    """The published schema of command ``name``'s JSON (shipped in ``memlens/schemas``)."""
    text = resources.files("memlens").joinpath("schemas", f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    # MCP wants an object schema at the root; every memlens report is an object (summary's
    # schema is a oneOf of two objects, without the root keyword).
    schema.setdefault("type", "object")
    return schema


class Refused(Exception):
    """A call memlens will not make: its one line is the tool error's text."""


def _inside(real: str, allow: Sequence[str]) -> str | None:
    """The directory of ``allow`` that holds ``real``, if any."""
    for d in allow:
        if real == d or real.startswith(d.rstrip(os.sep) + os.sep):
            return d
    return None


def _fd_path(fd: int) -> str | None:
    """The path of the file open on ``fd`` as the system records it (Linux), else None."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def allowed_path(path: Any, allow: Sequence[str]) -> str:
    """``path`` resolved (symbolic links followed) when it is a string naming something inside
    one of ``allow``; :class:`Refused` otherwise. Nothing is opened: :func:`open_allowed` opens."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise Refused("memlens: expected a file path (a non-empty string)")
    try:
        real = os.path.realpath(path)
    except OSError as e:  # a link changed while it was resolved
        raise Refused(f"memlens: {path}: changed while it was resolved ({e.strerror})") from None
    if _inside(real, allow) is None:
        raise Refused(f"memlens: {path}: outside the directories this server may read (--allow)")
    return real


def open_allowed(path: Any, allow: Sequence[str]) -> tuple[int, str]:
    """Opens ``path`` once, read-only, and returns (descriptor, resolved path) when what was
    opened is a regular file inside one of ``allow``; :class:`Refused` otherwise.

    The path is resolved, then walked from its allowed directory one component at a time
    without following symbolic links (``O_NOFOLLOW``) and without blocking (``O_NONBLOCK``):
    a link or FIFO swapped in meanwhile fails the walk. The opened file is then checked, not
    the path: ``fstat`` (a FIFO, device or socket is refused before a byte is read) and, where
    the system says it, the opened file's own path (``/proc/self/fd/N``) inside ``allow``."""
    real = allowed_path(path, allow)
    root = _inside(real, allow)
    assert root is not None
    parts = [p for p in real[len(root):].split(os.sep) if p]
    nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    last = os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = -1
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        for i, part in enumerate(parts):
            is_last = i == len(parts) - 1
            flags = last if is_last else os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"memlens: {path}: not a regular file")
        opened = _fd_path(fd)
        if opened is not None and _inside(opened, allow) is None:
            raise Refused(f"memlens: {path}: outside the directories this server may read (--allow)")
        return fd, real
    except FileNotFoundError:
        if fd >= 0:
            os.close(fd)
        raise Refused(f"memlens: {path}: not a regular file (no such file)") from None
    except OSError as e:
        if fd >= 0:
            os.close(fd)
        raise Refused(f"memlens: {path}: changed while it was opened, or cannot be read ({e.strerror})") from None
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def unknown_argument(tool: Tool, name: str) -> str:
    """The refusal of argument ``name``, which ``tool`` does not take: naming the closest
    argument it takes (``(did you mean 'cand'?)``), else every one it takes."""
    valid = list(tool.properties)
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f"did you mean {close[0]!r}?" if close else "it takes " + ", ".join(repr(v) for v in valid)
    return f"memlens: {tool.name}: unknown argument {name!r} ({hint})"


def _check_arguments(tool: Tool, args: dict[str, Any]) -> None:
    for k in args:
        if k not in tool.properties:
            raise Refused(unknown_argument(tool, k))
    for k in tool.required:
        if k not in args:
            raise Refused(f"memlens: {tool.name}: missing argument {k!r}")
    kinds = {"string": str, "integer": int, "boolean": bool, "array": list}
    for k, v in args.items():
        want = tool.properties[k].get("type")
        ok = isinstance(v, kinds[want]) if want in kinds else True
        if want == "integer" and isinstance(v, bool):
            ok = False
        if want == "array" and ok:
            ok = all(isinstance(x, str) for x in v)
        if not ok:
            raise Refused(f"memlens: {tool.name}: argument {k!r} must be a {want}")
        lo, hi = tool.properties[k].get("minimum"), tool.properties[k].get("maximum")
        if want == "integer" and ((lo is not None and v < lo) or (hi is not None and v > hi)):
            raise Refused(f"memlens: {tool.name}: argument {k!r} must be in {lo}..{hi}")
        enum = tool.properties[k].get("enum")
        if enum is not None and v not in enum:
            raise Refused(f"memlens: {tool.name}: argument {k!r} must be one of {', '.join(enum)}")


def bound(report: Any, limit: int) -> tuple[Any, list[dict[str, Any]]]:
    """``report`` with every list cut to ``limit`` items (stacks — lists of frame strings or
    frame objects under a key named ``frames`` or ``stack`` — to :data:`STACK_FRAMES`) and every
    string to :data:`STRING_CHARS` characters; and what was cut, as ``{path, shown, total}``."""
    cut: list[dict[str, Any]] = []

    def walk(v: Any, path: str, key: str) -> Any:
        if isinstance(v, dict):
            return {k: walk(x, f"{path}/{k}", k) for k, x in v.items()}
        if isinstance(v, list):
            most = STACK_FRAMES if key in ("frames", "stack", "stacks_frames") else limit
            if len(v) > most:
                cut.append({"path": path or "/", "shown": most, "total": len(v)})
            return [walk(x, f"{path}/{i}", "") for i, x in enumerate(v[:most])]
        if isinstance(v, str) and len(v) > STRING_CHARS:
            cut.append({"path": path, "shown": STRING_CHARS, "total": len(v)})
            return v[: STRING_CHARS - 1] + "…"
        return v

    return walk(report, "", ""), cut


def run_tool(name: str, args: dict[str, Any] | None, allow: Sequence[str]) -> dict[str, Any]:
    """The structured result of tool ``name`` called with ``args``: memlens's JSON, bounded,
    with ``memlens_truncated`` when something was cut; :class:`Refused` when memlens refuses."""
    tool = TOOLS.get(name)
    if tool is None:
        raise Refused(f"memlens: no tool {name!r}")
    args = dict(args or {})
    _check_arguments(tool, args)
    limit = int(args.get("limit", DEFAULT_LIMIT))
    fds: list[int] = []
    try:
        opened: dict[str, str] = {}
        positionals: list[str] = []
        for p in tool.paths:
            fd, real = open_allowed(args[p], allow)
            fds.append(fd)
            positionals.append(real)
            if os.path.isdir(f"/proc/{os.getpid()}/fd"):
                # The session reads the file this server opened, not the path again.
                opened[real] = f"/proc/{os.getpid()}/fd/{fd}"
        if name == "explain":
            positionals = [args["message"]]
        flags = tool.flags(args)
        try:
            argv = command_line(name, *positionals, **flags)
        except (MemlensError, TypeError) as e:
            raise Refused(f"memlens: {name}: {e}") from e
        code, out, error = _SESSION.request(argv, opened)
    finally:
        for fd in fds:
            os.close(fd)
    if code not in (0, 1):
        line = (error or "failed").strip().splitlines()[0]
        # The argument parser's refusals read `error: ...`; every refusal names memlens.
        raise Refused(line if line.startswith("memlens") else f"memlens: {name}: {line}")
    try:
        report = json.loads(out)
    except ValueError as e:
        raise Refused(f"memlens: {name}: the session printed no JSON report ({e})") from None
    bounded, cut = bound(report, limit)
    if cut:
        bounded["memlens_truncated"] = cut
    result: dict[str, Any] = bounded
    return result


def error_line(e: BaseException) -> str:
    """The tool error's text for any failure: memlens's one line (``memlens: ...``)."""
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return line if line.startswith("memlens") else f"memlens: {line}"


def judgement_lines(result: dict[str, Any]) -> list[str]:
    """The report's judgements in the CLI's words (``leak: found: judged 6 steps: ...``,
    ``judgement: cannot judge: ...; record ...``): the report's own (``judgement``, ``leak``,
    ``retained_graph``), then each device's ``capacity`` (``fit``), so a client that shows
    text never reads "nothing found" where nothing could be judged."""
    def words(j: Any) -> str | None:
        if not isinstance(j, dict) or j.get("state") not in ("found", "none", "cannot_judge"):
            return None
        return judgement_words(j) if j["state"] == "cannot_judge" else f"{j['state']}: {j.get('why', '')}"

    lines = []
    for key in ("judgement", "leak", "retained_graph"):
        w = words(result.get(key))
        if w is not None:
            lines.append(f"{key.replace('_', ' ')}: {w}")
    for d in result.get("devices") or []:
        w = words(d.get("capacity")) if isinstance(d, dict) else None
        if w is not None:
            lines.append(f"device {d.get('device')} capacity: {w}")
    return lines


def text_of(name: str, result: dict[str, Any]) -> str:
    """A few lines for a client that shows text: what the tool returned, what it judged and
    what was cut."""
    cut = result.get("memlens_truncated", [])
    head = f"memlens {name}: {len(json.dumps(result))} bytes of JSON (structured content, and the next text block)"
    lines = [head] + judgement_lines(result)
    lines += [f"cut {c['path']}: {c['shown']} of {c['total']}" for c in cut[:10]]
    if len(cut) > 10:
        lines.append(f"... {len(cut) - 10} more lists cut (raise `limit`)")
    return "\n".join(lines)


def texts_of(name: str, result: dict[str, Any]) -> list[str]:
    """The tool result's text blocks: :func:`text_of`'s lines, then the structured content
    serialized, as the MCP specification asks of a tool that returns structured content (for
    clients that read only text blocks)."""
    return [text_of(name, result), json.dumps(result, sort_keys=False)]


def main(argv: Sequence[str] | None = None) -> int:
    """Serves the tools over stdio until the client closes the connection."""
    p = argparse.ArgumentParser(prog="python -m memlens mcp", description=__doc__.splitlines()[0])
    p.add_argument("--allow", action="append", metavar="DIR", help="a directory whose files may be read (repeat; default: the current directory)")
    ns = p.parse_args(argv)
    allow = [os.path.realpath(d) for d in (ns.allow or [os.getcwd()])]
    try:
        import anyio
        from mcp import types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError:
        print("memlens: the MCP server needs the mcp package: pip install 'memlens[mcp]'", file=sys.stderr)
        return 2

    tools = [
        types.Tool(
            name=t.name,
            description=t.description,
            input_schema=t.input_schema(),
            output_schema=output_schema(t.name),
        )
        for t in TOOLS.values()
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result = await anyio.to_thread.run_sync(run_tool, params.name, params.arguments, allow)
        except Exception as e:  # noqa: BLE001 (every failure is a tool error with memlens's one line)
            return types.CallToolResult(content=[types.TextContent(text=error_line(e))], is_error=True)
        return types.CallToolResult(
            content=[types.TextContent(text=t) for t in texts_of(params.name, result)],
            structured_content=result,
        )

    server: Server[Any] = Server("memlens", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)
    return 0
