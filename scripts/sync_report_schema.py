#!/usr/bin/env python3
"""Copies the other commands' schemas into docs/schemas/report.schema.json.

`memlens report --format json` embeds the reports of summary, oom, leaks and categories, and per
moment frag's and top's device reports. The schema validator of tests/it/schemas.rs follows only
local `$ref`s, so report.schema.json holds copies of those definitions; this script refreshes
them from their sources after a change there (tests/it/schemas.rs checks they are equal):

    python3 scripts/sync_report_schema.py [--check]

--check changes nothing and exits 1 when a copy differs from its source.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "docs", "schemas")
SOURCES = ["summary", "oom", "leaks", "categories", "frag", "top", "timeline"]
# A source's top-level report as a definition of report.schema.json.
ROOTS = {"oom": "oom_report", "leaks": "leaks_report", "categories": "categories_report"}
ROOT_KEYS = ("description", "type", "required", "properties", "additionalProperties")
# Definitions of the page's own data (src/analyze/page), written in report.schema.json itself.
OWN = {"page_absence", "band", "device_page", "flame_trees", "frame_info", "moment_view", "samples",
       "segment_view", "state_view", "timeline_view", "top_view", "tree", "summary_report",
       "oom_report", "leaks_report", "categories_report"}


def load(name):
    with open(os.path.join(DIR, name + ".schema.json")) as f:
        return json.load(f)


def expected(report):
    """The definitions report.schema.json must hold, as their sources give them."""
    out = {}
    for name in SOURCES:
        src = load(name)
        for k, v in src.get("$defs", {}).items():
            if k not in OWN:
                out[k] = v
        if name in ROOTS:
            out[ROOTS[name]] = {k: src[k] for k in ROOT_KEYS if k in src}
            out[ROOTS[name]]["description"] = report["$defs"][ROOTS[name]]["description"]
    summary = load("summary")["$defs"]["file_summary"]
    s = json.loads(json.dumps(summary))
    s["required"] = [r for r in s["required"] if r != "file"]
    s["properties"].pop("file", None)
    s["description"] = report["$defs"]["summary_report"]["description"]
    out["summary_report"] = s
    top = load("top")["$defs"]["device_top"]
    view = json.loads(json.dumps(report["$defs"]["top_view"]))
    row_stacks = view["properties"]["row_stacks"]
    view["properties"] = dict(top["properties"], row_stacks=row_stacks)
    view["required"] = [r for r in top["required"]] + ["row_stacks"]
    out["top_view"] = view
    return out


def main():
    check = "--check" in sys.argv[1:]
    path = os.path.join(DIR, "report.schema.json")
    with open(path) as f:
        report = json.load(f)
    want = expected(report)
    stale = sorted(k for k, v in want.items() if report["$defs"].get(k) != v)
    if check:
        for k in stale:
            print(f"report.schema.json: $defs/{k} differs from its source", file=sys.stderr)
        return 1 if stale else 0
    report["$defs"].update(want)
    with open(path, "w") as f:
        json.dump(report, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("updated: " + (", ".join(stale) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
