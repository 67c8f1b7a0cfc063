"""The notebook API (``memlens.open``): every method's result is the command's JSON, its rows
and DataFrame hold that JSON's numbers, its HTML table is escaped and bounded, results are kept
per handle, the handle renders the report page in a sandboxed iframe, and the example notebook
(``examples/notebook.py``) runs. ``to_pandas`` needs pandas: required under CI.
"""

from __future__ import annotations

import html
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, SAMPLES, require, run_python, subprocess_env

import memlens

try:
    import pandas  # noqa: F401  (only whether it is there)

    HAVE_PANDAS = True
except ImportError:  # pragma: no cover
    HAVE_PANDAS = False

FRAG = SAMPLES / "frag_oom.pickle"

# (method, its arguments, the command and flags it must equal, the JSON rows' path)
METHODS = [
    ("summary", {}, ("summary", {}), lambda d: d["devices"]),
    ("top", {"at": "end"}, ("top", {"at": "end"}), lambda d: [s for x in d["devices"] for s in x["sites"]]),
    ("timeline", {"points": 0}, ("timeline", {"points": 0}), lambda d: [p for x in d["devices"] for p in x["points"]]),
    ("categories", {}, ("categories", {}), lambda d: [c for x in d["devices"] for c in x["categories"]]),
    ("leaks", {}, ("leaks", {}), lambda d: d["findings"]),
    ("oom", {}, ("oom", {}), lambda d: d["ooms"]),
    ("fit", {}, ("fit", {}), lambda d: [f for x in d["devices"] for f in x["fixes"]]),
]


def test_every_method_is_its_command() -> None:
    snap = memlens.open(FRAG)
    for name, args, (cmd, flags), rows_of in METHODS:
        r = getattr(snap, name)(**args)
        want = memlens.analyze(cmd, FRAG, **flags)
        assert r.data == want, name
        assert len(r.rows) == len(rows_of(want)), name
        assert set(r.rows[0]) == set(r.columns) if r.rows else True
        if name == "leaks":
            # frag_oom holds no step: not "0 rows" but why it cannot judge (test below)
            assert repr(r) == f"<memlens leaks: cannot judge: {r.judgement['why']}; record {r.judgement['record']}>"
        else:
            assert repr(r) == f"<memlens {cmd}: {len(r.rows)} rows>"
    base, cand = memlens.open(SAMPLES / "diff_base.pickle"), memlens.open(SAMPLES / "diff_cand.pickle")
    d = base.diff(cand)
    assert d.data == memlens.analyze("diff", SAMPLES / "diff_base.pickle", SAMPLES / "diff_cand.pickle")
    assert sum(r["delta_bytes"] for r in d.rows) == sum(s["delta_bytes"] for s in d["sites"])
    assert base.diff(SAMPLES / "diff_cand.pickle") is d, "a path and a handle of it are one call"


def test_one_decode_per_handle_and_answers_kept() -> None:
    """Every analysis of one handle is answered from one decode of its file (the session's
    count), another file is one more, and each distinct call's answer is kept."""
    with memlens.open(FRAG) as snap:
        assert snap.top() is snap.top()
        assert snap.top(at="end") is not snap.top()
        for name in ("summary", "timeline", "categories", "leaks", "oom", "fit"):
            getattr(snap, name)()
        snap.report_html()
        assert snap.decodes == 1, "one decode for all of them"
        snap.diff(SAMPLES / "diff_cand.pickle")
        assert snap.decodes == 2, "the other file once more"
        snap.diff(SAMPLES / "diff_cand.pickle", at="end")
        assert snap.decodes == 2
    with pytest.raises(memlens.MemlensError, match="unexpected argument|expected"):
        memlens.open(FRAG).top(at="nowhere")


def test_a_changed_file_is_decoded_again(tmp_path: Path) -> None:
    f = tmp_path / "snap.pickle"
    f.write_bytes((SAMPLES / "train_small.pickle").read_bytes())
    with memlens.open(f) as snap:
        first = snap.analyze("summary")
        f.write_bytes((SAMPLES / "diff_cand.pickle").read_bytes())
        second = snap.analyze("top")
        assert snap.decodes == 2
        assert second == memlens.analyze("top", f)
        assert first["file"] == str(f)
        assert first["devices"] == memlens.analyze("summary", SAMPLES / "train_small.pickle")["devices"]


@pytest.mark.installed
def test_to_pandas_holds_the_numbers() -> None:
    require(HAVE_PANDAS, "pandas (pip install 'memlens[pandas]') is not installed")
    snap = memlens.open(FRAG)
    top = snap.top()
    df = top.to_pandas()
    assert list(df.columns) == list(top.columns)
    assert len(df) == len(top.rows)
    assert int(df["bytes"].sum()) == sum(s["bytes"] for d in top["devices"] for s in d["sites"])
    tl = snap.timeline().to_pandas()
    assert int(tl["live_requested_bytes"].max()) == snap.timeline()["devices"][0]["peak_bytes"]


def test_to_pandas_without_pandas_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def no_pandas(name: str, *a: Any) -> Any:
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real(name, *a)

    monkeypatch.setattr(importlib, "import_module", no_pandas)
    with pytest.raises(ImportError, match=r"pip install 'memlens\[pandas\]'"):
        memlens.open(FRAG).top().to_pandas()


def test_html_tables_are_escaped_and_bounded() -> None:
    snap = memlens.open(SAMPLES / "diff_cand.pickle")
    tl = snap.timeline(points=0)
    assert len(tl.rows) > memlens._notebook.HTML_ROWS
    out = tl._repr_html_()
    assert out.count("<tr>") == memlens._notebook.HTML_ROWS + 1, "header and 20 rows"
    assert f"… {len(tl.rows) - memlens._notebook.HTML_ROWS} more rows" in out
    r = memlens._notebook.TopResult({"devices": [{"device": 0, "sites": [{"site": "<img src=x onerror=alert(1)>", "bytes": 2048, "count": 1, "share": 1.0}]}]})
    out = r._repr_html_()
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "2.00 KiB" in out


def test_shares_are_percentages_with_the_fraction_in_the_title() -> None:
    fmt = memlens._notebook.format_share
    assert [fmt(v) for v in (0.123, 0.1235, 1.0, 0.0, 7.3e-11, 0.00049, 0.0005, -7.3e-11)] == [
        "12.3%", "12.3%", "100.0%", "0.0%", "<0.1%", "<0.1%", "0.1%", "-<0.1%"]
    sites = [{"site": f"s{i}.py:1", "bytes": 1024, "count": 1, "share": v} for i, v in enumerate((0.5, 7.3e-11, 0.0))]
    out = memlens._notebook.TopResult({"devices": [{"device": 0, "sites": sites}]})._repr_html_()
    assert '<td><span title="0.5">50.0%</span></td>' in out
    assert '<td><span title="7.3e-11">&lt;0.1%</span></td>' in out
    assert '<td><span title="0.0">0.0%</span></td>' in out
    assert "e-11<" not in out, "no raw fraction shown"
    cats = memlens._notebook.CategoriesResult(
        {"devices": [{"device": 0, "categories": [{"category": "x", "bytes": 3, "count": 1, "share": 0.25, "confidence": "high"}]}]})
    assert '<td><span title="0.25">25.0%</span></td>' in cats._repr_html_()
    # Any column named *_share is a fraction too; a count stays a count.
    assert memlens._notebook._cell("activation_share", 0.0421) == '<span title="0.0421">4.2%</span>'
    assert memlens._notebook._cell("count", 3) == "3"


def test_a_real_top_shows_each_share_as_the_cli_does() -> None:
    top = memlens.open(FRAG).top()
    out = top._repr_html_()
    rows = top.rows[: memlens._notebook.HTML_ROWS]
    assert rows and all(isinstance(r["share"], float) for r in rows)
    for r in rows:
        share = r["share"]
        # The CLI's text: one decimal of the percentage; what reads 0.0% but is not zero, <0.1%.
        want = "&lt;0.1%" if 0 < share * 100 < 0.05 else f"{share * 100:.1f}%"
        assert f'<span title="{share!r}">{want}</span>' in out, (r, out)


def test_the_handle_shows_the_page_in_a_sandbox() -> None:
    snap = memlens.open(SAMPLES / "train_small.pickle")
    out = snap._repr_html_()
    m = re.fullmatch(r'<iframe sandbox="allow-scripts" srcdoc="([^"]*)" style="[^"]*"></iframe>', out)
    assert m, out[:200]
    document = html.unescape(m.group(1))
    assert "<" not in m.group(1), "the page is one escaped attribute"
    # The iframe holds the loader and the page gzipped: the page comes back byte for byte.
    page = memlens._notebook.unpack_inline_page(document)
    assert page == snap.report_html()
    assert page.startswith("<!DOCTYPE html>") and 'id="memlens-data"' in page
    assert 'id="memlens-data"' not in document, "the page's data is packed, not inline"


def test_an_inline_page_is_small() -> None:
    # Issue 54: each page shown inline added its whole size (2 MB on a real file) to the notebook.
    snap = memlens.open(SAMPLES / "frag_oom.pickle")
    page = snap.report_html()
    shown = snap._repr_html_()
    assert len(shown) * 3 < len(page), (len(shown), len(page))
    document = html.unescape(re.search(r'srcdoc="([^"]*)"', shown).group(1))  # type: ignore[union-attr]
    assert memlens._notebook.unpack_inline_page(document) == page


def test_a_missing_file_is_memlens_error() -> None:
    with pytest.raises(memlens.MemlensError, match="not a regular file"):
        memlens.open(SAMPLES / "no_such.pickle")


def test_the_example_notebook_runs() -> None:
    require(HAVE_PANDAS, "pandas (pip install 'memlens[pandas]') is not installed")
    p = run_python([str(ROOT / "examples" / "notebook.py")], subprocess_env(), str(ROOT))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "OOM at event 240: fragmentation" in out, out
    assert "fix expandable_segments (free)" in out, out
    assert "the base hits 1 OOM and the candidate no OOM" in out, out
    assert Path(ROOT / "examples" / "notebook.py").read_text().count("# %%") >= 5


def test_leaks_show_their_judgement_not_zero_rows() -> None:
    """An empty leaks table says why: "cannot judge" (with what to record) when the trace cannot
    tell growth, "judged N steps: nothing grows" when it can; a finding shows its table."""
    cases = [
        ("frag_oom.pickle", "cannot_judge", "cannot judge: "),
        ("kv_cache.pickle", "none", "judged 8 steps: nothing grows"),
        ("list_leak.pickle", "found", "<table>"),
    ]
    for name, state, words in cases:
        r = memlens.open(SAMPLES / name).leaks()
        assert r.judgement == r.data["judgement"], name
        assert r.judgement["state"] == state, name
        out = r._repr_html_()
        assert words in out, (name, out)
        assert "0 rows" not in out, (name, out)
        if state == "cannot_judge":
            assert r.judgement["record"] and html.escape(r.judgement["record"]) in out, out
            assert 'data-state="cannot_judge"' in out


def test_categories_fit_and_kinds_of_growth_show_their_judgements() -> None:
    """The notebook says what could not be judged as the CLI does: categories of a file without
    frames, the capacity of a moment without one, and each kind of growth apart."""
    c = memlens.open(SAMPLES / "state_only.pickle").categories()
    assert c.judgement == c.data["judgement"] and c.judgement["state"] == "cannot_judge"
    out = c._repr_html_()
    assert "<table>" in out and 'data-state="cannot_judge"' in out, out
    assert html.escape(f"cannot judge: {c.judgement['why']}; record {c.judgement['record']}") in out, out
    assert repr(c).endswith(f"cannot judge: {c.judgement['why']}; record {c.judgement['record']}>"), repr(c)
    assert memlens.open(SAMPLES / "train_small.pickle").categories().judgement["state"] == "found"

    f = memlens.open(SAMPLES / "train_small.pickle").fit()
    cap = f.capacity[0]
    assert cap == f.data["devices"][0]["capacity"] and cap["state"] == "cannot_judge", cap
    assert html.escape(cap["why"]) in f._repr_html_()

    r = memlens.open(SAMPLES / "retained_graph.pickle").leaks()
    assert (r.leak["state"], r.retained_graph["state"]) == ("none", "found")
    out = r._repr_html_()
    assert "<b>retained graph</b>" in out and 'data-state="found"' in out, out
    # judged without growth: no line per kind (the judgement says it for both)
    assert "<b>leak</b>" not in memlens.open(SAMPLES / "kv_cache.pickle").leaks()._repr_html_()
