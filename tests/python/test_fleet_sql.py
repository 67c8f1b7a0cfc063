"""The cross-rank answer in SQL (python/memlens/fleet_views.sql, :func:`memlens.fleet.views`):
on each rank set, ``memlens batch --format json``'s ``cross_rank`` and the DuckDB views over
``memlens batch --format parquet``'s dataset of the same files are compared field by field.

The rank sets: ten real snapshots of ``../shared/samples/real`` posed as ranks (two stand
out, one ran out of memory, one records no allocator settings); the generated ranks of
samples/ranks with OOM samples as more ranks (OOMs one after another, settings that differ,
a rank without settings, a file without a rank, one that cannot be read); three ranks (not
judged); ranks derived here from samples (an OOM without times, settings edited); a pipeline
job of 16 ranks dumped at two steps with the coordinates in the paths (``at_step``, the step x
rank matrix from the paths, groups by coordinates and a stage outlier); samples/ranks alone
(the matrix from the traces' steps). Each set asserts what it is there for, so that no
comparison passes on empty lists; where ``steps`` or ``parallel`` is null the views are empty.

duckdb is a prerequisite (skipped outside CI when missing, required under CI: scripts/test
installs it), as are ``../shared/samples/real`` for the real set.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pickle
import subprocess
from pathlib import Path
from typing import Any

import memlens
import pytest
from conftest import ROOT, SAMPLES, require
from memlens import fleet

RANKS = SAMPLES / "ranks"
REAL = ROOT.parent / "shared" / "samples" / "real"
# As tests/it/batch.rs `cross_rank_of_real_snapshots_as_ranks`: eight runs of one project, one
# that ran out of memory (84 GB peak), one that records no allocator settings.
REAL_RANKS = sorted(n for n in (os.listdir(REAL) if REAL.is_dir() else []) if n.startswith("Wedsonlin__")) + [
    "Constructor-Sun__code_location__memory_snapshot.pickle",
    "JasperSolt__EoR_NN__snapshot.pickle",
]
# The views fleet.views creates, in order.
VIEWS = [
    "memlens_files", "memlens_sites", "memlens_timeline", "memlens_ooms", "memlens_leaks",
    "memlens_steps", "memlens_rank_files", "memlens_answer_step", "memlens_rank_peaks",
    "memlens_rank_sites", "memlens_rank_trace_steps", "memlens_step_cells", "memlens_step_peaks",
    "memlens_rank_coords", "memlens_thresholds", "memlens_peak_threshold", "memlens_outlier_ranks",
    "memlens_site_outliers", "memlens_site_spread", "memlens_first_oom", "memlens_settings_differ",
    "memlens_step_columns", "memlens_step_matrix", "memlens_parallel_groups",
    "memlens_parallel_axes", "memlens_stage_outliers", "memlens_parallel",
]
# cross_rank lists at most this many outlier ranks per site and later OOM ranks (LISTED).
LISTED = 8


@pytest.fixture(scope="module")
def duckdb() -> Any:
    require(importlib.util.find_spec("duckdb") is not None, "duckdb is not installed (pip install duckdb)")
    return importlib.import_module("duckdb")


def _batch(memlens_bin: str, ranks: Path | str, out: Path) -> tuple[dict[str, Any], Any]:
    """``cross_rank`` of ``batch --format json`` on the files of ``ranks`` (a directory or a
    glob), and the dataset ``batch --format parquet`` writes of them into ``out``."""
    p = subprocess.run([memlens_bin, "batch", str(ranks), "--format", "json"],
                       capture_output=True, text=True, check=False)
    assert p.returncode in (0, 2), p.stderr  # 2: a file could not be read
    report = json.loads(p.stdout)
    d = subprocess.run([memlens_bin, "batch", str(ranks), "--format", "parquet", "-o", str(out)],
                       capture_output=True, text=True, check=False)
    assert d.returncode == p.returncode, d.stderr
    assert (out / "table=files").is_dir(), d.stderr
    cross: dict[str, Any] = report["cross_rank"]
    return cross, report


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [c[0] for c in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _sql_answer(duckdb: Any, root: Path) -> Any:
    con = duckdb.connect()
    assert fleet.views(con, root) == VIEWS
    return con


def _check(con: Any, x: dict[str, Any]) -> None:
    """The views say what ``x`` (a ``cross_rank``) says, field by field."""
    t = _rows(con, "SELECT * FROM memlens_peak_threshold")
    assert t == [{
        "ranks": x["ranks"],
        "median_peak_bytes": x["median_peak_bytes"],
        "peak_threshold_bytes": x["peak_threshold_bytes"],
        "at_step": x["at_step"],
    }]
    assert _rows(con, "SELECT at_step FROM memlens_answer_step") == [{"at_step": x["at_step"]}]
    # outliers: every field, in order (over_median: the same f64 division).
    assert _rows(con, "SELECT * FROM memlens_outlier_ranks") == x["outliers"]
    # sites: those with an outlier, biggest excess first; cross_rank lists the first `--sites`.
    spread = _rows(con, "SELECT * FROM memlens_site_spread WHERE outlier_ranks > 0")
    assert len(spread) == x["sites_with_outliers"]
    assert len(x["sites"]) == min(len(spread), len(x["sites"]))
    outs = _rows(con, "SELECT * FROM memlens_site_outliers")
    for want, got in zip(x["sites"], spread):
        listed = [{"rank": o["rank"], "bytes": o["bytes"]} for o in outs if o["site"] == got["site"]]
        assert len(listed) == got["outlier_ranks"]
        assert {
            "site": got["site"], "median_bytes": got["median_bytes"], "min_bytes": got["min_bytes"],
            "max_bytes": got["max_bytes"], "outliers": listed[:LISTED], "outlier_ranks": got["outlier_ranks"],
        } == want
        assert got["excess_bytes"] == got["max_bytes"] - got["median_bytes"]
    if x["peak_threshold_bytes"] is None:
        assert outs == [] and spread == []
    # first_oom, its `then` and ranks_with_oom.
    ooms = _rows(con, "SELECT * FROM memlens_first_oom")
    assert len(ooms) == x["ranks_with_oom"]
    first = x["first_oom"]
    if first is None:
        assert all(o["after_us"] is None for o in ooms)
    else:
        o = ooms[0]
        assert o["after_us"] == 0
        assert {
            "rank": o["rank"], "file": o["file"],
            "oom": {k: o[k] for k in ("time_us", "device", "requested_bytes", "verdict")},
            "then": [{"rank": r["rank"], "after_us": r["after_us"]} for r in ooms[1:1 + LISTED]],
        } == first
    # settings_differ: a row per key and value, grouped back by key.
    diff: list[dict[str, Any]] = []
    for r in _rows(con, "SELECT * FROM memlens_settings_differ"):
        if not diff or diff[-1]["key"] != r["key"]:
            diff.append({"key": r["key"], "values": []})
        diff[-1]["values"].append({"value": r["value"], "ranks": r["ranks"]})
    assert diff == x["settings_differ"]
    # Every rank file of the answer's step is a rank of the views.
    peaks = _rows(con, "SELECT * FROM memlens_rank_peaks")
    assert len(peaks) == x["ranks"]
    _check_steps(con, x["steps"])
    _check_parallel(con, x["parallel"])


def _check_steps(con: Any, want: dict[str, Any] | None) -> None:
    """The step views say what ``cross_rank.steps`` says (all empty where it is null)."""
    matrix = _rows(con, "SELECT * FROM memlens_step_matrix")
    cells = _rows(con, "SELECT * FROM memlens_step_peaks")
    columns = _rows(con, "SELECT * FROM memlens_step_columns")
    if want is None:
        assert matrix == [] and cells == [] and columns == []
        return
    assert len(matrix) == 1
    m = matrix[0]
    at = {(c["rank"], c["step"]): c["peak_bytes"] for c in cells}
    assert len(at) == len(cells)
    assert {
        "source": m["source"], "found_by": m["found_by"], "steps_found": m["steps_found"],
        "steps_of_one_rank": m["steps_of_one_rank"], "steps": m["steps"],
        "ranks": [{"rank": r, "peaks": [at.get((r, s)) for s in m["steps"]]} for r in m["ranks"]],
        "columns": columns,
    } == want


def _check_parallel(con: Any, want: dict[str, Any] | None) -> None:
    """The parallel views say what ``cross_rank.parallel`` says (by the paths' coordinates:
    all empty where it is null)."""
    summary = _rows(con, "SELECT * FROM memlens_parallel")
    groups = _rows(con, "SELECT * FROM memlens_parallel_groups")
    axes = _rows(con, "SELECT * FROM memlens_parallel_axes")
    stage = _rows(con, "SELECT * FROM memlens_stage_outliers")
    if want is None:
        assert summary == [] and groups == [] and axes == [] and stage == []
        return
    assert len(summary) == 1
    got = dict(summary[0])
    got["by_axis"] = [
        {"axis": a["axis"],
         "groups": [{k: v for k, v in g.items() if k != "axis"} for g in groups if g["axis"] == a["axis"]],
         "between_bytes": a["between_bytes"], "within_bytes": a["within_bytes"]}
        for a in axes
    ]
    got["stage_outliers"] = stage
    assert got == {
        "source": want["source"], "ranks_placed": want["ranks_placed"], "by_axis": want["by_axis"],
        "stages_judged": want["stages_judged"], "stage_outliers": want["stage_outliers"],
        "widest_axis": want["widest_axis"],
    }


def _link(src: Path, dst: Path) -> None:
    os.symlink(src.resolve(), dst)


def test_real_snapshots_as_ranks(duckdb: Any, memlens_bin: str, tmp_path: Path) -> None:
    require(REAL.is_dir() and all((REAL / n).is_file() for n in REAL_RANKS) and len(REAL_RANKS) == 10,
            f"no real snapshots in {REAL} (../shared)")
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r, n in enumerate(REAL_RANKS):
        _link(REAL / n, ranks / f"rank{r}.pickle")
    x, _ = _batch(memlens_bin, ranks, tmp_path / "ds")
    # What this set is there for: ranks and sites that stand out, an OOM, settings that differ.
    assert x["ranks"] == 10 and x["peak_threshold_bytes"] is not None
    assert [o["rank"] for o in x["outliers"]][:1] == [8] and all(o["site"] for o in x["outliers"])
    assert x["sites_with_outliers"] > 0 and x["sites"]
    assert x["first_oom"]["rank"] == 8 and x["ranks_with_oom"] == 1
    assert x["settings_differ"]
    _check(_sql_answer(duckdb, tmp_path / "ds"), x)


def test_generated_ranks_with_oom_ranks(duckdb: Any, memlens_bin: str, tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for f in sorted(RANKS.glob("rank*.pickle")):
        _link(f, ranks / f.name)
    more = ["capacity_oom", "frag_oom", "outside_oom", "expandable_multi", "no_optimizer_state",
            "alloc_conf_2026", "legacy_2_0", "xpu_device1"]
    for r, n in enumerate(more, start=4):
        _link(SAMPLES / f"{n}.pickle", ranks / f"rank{r}.pickle")
    _link(SAMPLES / "train_small.pickle", ranks / "no_rank_here.pickle")
    (ranks / "rank12.pickle").write_bytes(b"not a snapshot")
    x, report = _batch(memlens_bin, ranks, tmp_path / "ds")
    assert report["failed"] == 1
    assert x["ranks"] == 12
    assert x["outliers"] and x["sites_with_outliers"] > 0
    assert x["first_oom"] is not None and len(x["first_oom"]["then"]) >= 3
    assert x["ranks_with_oom"] == 5
    assert any(v["value"] is None for d in x["settings_differ"] for v in d["values"])
    _check(_sql_answer(duckdb, tmp_path / "ds"), x)


def test_three_ranks_are_not_judged(duckdb: Any, memlens_bin: str, tmp_path: Path) -> None:
    """Fewer than 4 ranks: no threshold, no outlier; and a dataset path with a quote in it."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in range(2):
        _link(RANKS / f"rank{r}.pickle", ranks / f"rank{r}.pickle")
    _link(SAMPLES / "capacity_oom.pickle", ranks / "rank_7.pickle")
    out = tmp_path / "it's -- a 'dataset'"
    x, _ = _batch(memlens_bin, ranks, out)
    assert x["ranks"] == 3 and x["peak_threshold_bytes"] is None
    assert x["outliers"] == [] and x["sites"] == [] and x["sites_with_outliers"] == 0
    assert x["first_oom"] is not None
    con = _sql_answer(duckdb, out)
    _check(con, x)
    assert "''" in fleet.views_sql(out)


def test_derived_ranks_untimed_oom_and_edited_settings(duckdb: Any, memlens_bin: str, tmp_path: Path) -> None:
    """An OOM without event times (cross_rank cannot say which rank was first), settings
    edited rank by rank (a key only some ranks have, a string with quotes, backslashes and
    non-ASCII, floats, a nested map that differs), and equal peaks (ties)."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    with open(SAMPLES / "frag_oom.pickle", "rb") as f:
        untimed = pickle.load(f)
    for trace in untimed["device_traces"]:
        for e in trace:
            e.pop("time_us", None)
    with open(ranks / "rank0.pickle", "wb") as f:
        pickle.dump(untimed, f)
    _link(SAMPLES / "capacity_oom.pickle", ranks / "rank1.pickle")
    with open(SAMPLES / "train_small.pickle", "rb") as f:
        base = pickle.load(f)
    edits: list[dict[str, Any]] = [
        {},
        {"PYTORCH_CUDA_ALLOC_CONF": 'max_split_size_mb:128,"q"\\ é'},
        {"garbage_collection_threshold": 0.8, "only_here": 1},
        {"garbage_collection_threshold": 1e-7},
        {"roundup_power2_divisions": {"1": 4}},
        {},
    ]
    for r, edit in enumerate(edits, start=2):
        snap = dict(base)
        settings = dict(snap.get("allocator_settings") or {})
        for k, v in edit.items():
            if isinstance(v, dict):
                settings[k] = {**settings.get(k, {}), **v}
            else:
                settings[k] = v
        snap["allocator_settings"] = settings
        with open(ranks / f"rank{r}.pickle", "wb") as f:
            pickle.dump(snap, f)
    x, _ = _batch(memlens_bin, ranks, tmp_path / "ds")
    assert x["ranks"] == 8 and x["ranks_with_oom"] == 2 and x["first_oom"] is None
    assert any("no event times" in c for c in x["cannot_judge"])
    keys = {d["key"] for d in x["settings_differ"]}
    assert {"PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold", "only_here"} <= keys, keys
    _check(_sql_answer(duckdb, tmp_path / "ds"), x)


def test_a_pipeline_job_over_two_steps(duckdb: Any, memlens_bin: str, tmp_path: Path) -> None:
    """As tests/it/batch.rs ``a_pipeline_job_over_two_steps``, with the coordinates in the
    paths instead of a topology file: 16 ranks (tp 2 x dp 4 x pp 2, tp fastest) dumped at
    steps 10 and 20 (``iteration_N/rankR_tpT_dpD_ppP_memory_snapshot.pickle``). At step 20
    stage 0 and rank 13 of stage 1 are big: the answer is about step 20 (``at_step``), the
    matrix's source is the paths, and rank 13 alone stands out within its stage."""
    job = tmp_path / "job"
    for step in (10, 20):
        (job / f"iteration_{step}").mkdir(parents=True)
        for r in range(16):
            tp, dp, pp = r % 2, (r // 2) % 4, r // 8
            big = step == 20 and (pp == 0 or r == 13)
            _link(RANKS / ("rank2.pickle" if big else "rank0.pickle"),
                  job / f"iteration_{step}" / f"rank{r}_tp{tp}_dp{dp}_pp{pp}_memory_snapshot.pickle")
    # One more step with fewer ranks: not the answer's step, but a column of the matrix.
    (job / "iteration_30").mkdir()
    for r in (0, 1):
        _link(RANKS / "rank0.pickle", job / "iteration_30" / f"rank{r}_tp{r}_dp0_pp0_memory_snapshot.pickle")
    x, report = _batch(memlens_bin, f"{job}/**/rank*.pickle", tmp_path / "ds")
    assert len(report["files"]) == 34
    assert x["at_step"] == 20 and x["ranks"] == 16 and x["peak_threshold_bytes"] is not None
    assert x["first_oom"] is None
    s = x["steps"]
    assert s["source"] == "path" and s["steps"] == ["10", "20", "30"] and len(s["ranks"]) == 16
    assert s["columns"][1]["max_rank"] == 0 and s["columns"][2]["ranks"] == 2
    p = x["parallel"]
    assert p["source"] == "names" and p["ranks_placed"] == 16 and p["stages_judged"] == 2
    assert [a["axis"] for a in p["by_axis"]] == ["tp", "dp", "pp"]
    assert [(o["rank"], o["stage"], o["stage_ranks"]) for o in p["stage_outliers"]] == [(13, 1, 8)]
    con = _sql_answer(duckdb, tmp_path / "ds")
    _check(con, x)
    assert _rows(con, "SELECT count(*) AS n FROM memlens_rank_files") == [{"n": 34}]


def test_trace_steps_make_the_matrix(duckdb: Any, memlens_bin: str, tmp_path: Path) -> None:
    """samples/ranks alone: no step in the paths, each trace marks ProfilerStep#1 and #2, and
    rank 2 stands out at both; plus a rank of two devices (the matrix reads the steps of its
    biggest device)."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for f in sorted(RANKS.glob("rank*.pickle")):
        _link(f, ranks / f.name)
    _link(SAMPLES / "expandable_multi.pickle", ranks / "rank4.pickle")
    x, _ = _batch(memlens_bin, ranks, tmp_path / "ds")
    assert x["at_step"] is None and x["parallel"] is None
    s = x["steps"]
    assert s["source"] == "trace" and s["found_by"] and s["steps_found"] >= 2
    assert s["columns"] and all(2 in c["outlier_ranks"] for c in s["columns"][:2]), s["columns"]
    _check(_sql_answer(duckdb, tmp_path / "ds"), x)


def test_views_sql_quotes_the_root(tmp_path: Path) -> None:
    """The root goes only into string literals, its quotes doubled; a relative one is made
    absolute."""
    sql = fleet.views_sql("a'b/")
    want = os.path.abspath("a'b").replace("'", "''")
    assert f"read_parquet('{want}/table=files/**/*.parquet'" in sql
    assert "{root}" not in sql
    assert fleet.views_sql("s3://bucket/ds/").count("'s3://bucket/ds/table=") == 7
    with pytest.raises(ValueError):
        fleet.views_sql("a\x00b")


@pytest.mark.installed
def test_views_sql_ships_with_the_package() -> None:
    """fleet_views.sql is in the package as installed (maturin packs the package directory)."""
    sql = Path(memlens.__file__).parent / "fleet_views.sql"
    assert sql.is_file()
    assert "CREATE OR REPLACE VIEW memlens_settings_differ" in sql.read_text(encoding="utf-8")


def test_the_sql_file_is_the_one_documented() -> None:
    """Each view of fleet_views.sql is named in fleet.views' docstring and docs/scale.md."""
    doc = fleet.views.__doc__ or ""
    scale = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    for v in VIEWS:
        assert v in doc, v
        assert v in scale, v
