"""The report's data is one declared answer (catalog's `report`, `snippet`, `report_diff`): the front end asks the
Profile once and draws what it gets, a section that does not apply comes with its one-line reason, and a warm
`nsysql report` reads the stored answer without DuckDB."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ROOT, built_cache, craft, fixture, loaded

import nsysql
from nsysql.analyses.report import SECTIONS
from nsysql.report import build, snippet

SMALL = fixture("train_small")


class Recorder:
    """A Profile that notes each attribute the report reads of it."""

    def __init__(self, prof):
        self._prof, self.read = prof, []

    def __getattr__(self, name):
        self.read.append(name)
        return getattr(self._prof, name)


def test_the_report_asks_the_profile_one_question():
    page = Recorder(nsysql.load(str(SMALL)))
    build(page)
    assert set(page.read) == {"path", "report"}, page.read
    text = Recorder(nsysql.load(str(SMALL)))
    snippet(text)
    assert set(text.read) == {"path", "snippet"}, text.read


def test_the_report_holds_the_answers_of_the_declarations():
    """Its sections are the other analyses' answers: the iterations, the ranges (most total time first),
    summary's findings and top kernels, the facts' span and nsys version."""
    p = loaded(str(SMALL))
    data = p.report()
    assert data["iterations"].equals(p.iterations())
    assert data["ranges"].equals(p.ranges().sort("total_ns", descending=True))
    assert data["findings"].equals(p.summary()["findings"])
    assert data["kernels"].equals(p.kernels(top=10))
    cards = dict(data["cards"].select("label", "value").iter_rows())
    span = int(p.facts["span_ns"][0])
    assert cards["span"] == f"{span / 1e9:,.3f} s" and cards["nsys"] == p.facts["nsys_version"][0]
    # by construction (fixtures/train_small/COMMAND.md): 20 steps of `Batch`, the first warm-up
    assert data["iterations"].height == 20
    assert "20 iterations of `Batch`" in dict(data["notes"].iter_rows())["iterations_line"]
    assert set(data) <= set(SECTIONS) and set(p.snippet()) <= set(SECTIONS)


def test_a_section_that_does_not_apply_says_why(tmp_path):
    """Without NVTX ranges there is no loop and no range table: the data lacks both, its notes say why, and the
    page prints those sentences."""
    path = craft(tmp_path / "no_nvtx.sqlite", "DELETE FROM NVTX_EVENTS")
    p = nsysql.load(str(path))
    data = p.report()
    notes = dict(data["notes"].iter_rows())
    assert "iterations" not in data and "ranges" not in data and "kernels_by_range" not in data
    try:
        p.iterations()
    except nsysql.NsysqlError as e:
        assert notes["iterations_why"] == str(e)
    else:
        raise AssertionError("iterations() answered without NVTX ranges")
    page = build(p)[0]
    assert "No NVTX ranges: the profile was captured without -t nvtx" in notes["ranges_why"]
    assert notes["ranges_why"] in page and "No iteration breakdown: " in page


def _report(cache, *args) -> tuple[str, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NSYSQL_CACHE_DIR": str(cache)}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nsysql", "report", str(SMALL), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return out.stdout, names


def test_a_warm_report_reads_its_stored_answer(tmp_path):
    """The second `report` of one export reads the stored answer: the same page and snippet, DuckDB not even
    imported."""
    html = tmp_path / "r.html"
    cache = built_cache(tmp_path / "cache", SMALL)  # the entry a first load builds, no answer stored
    for args in (["-f", "markdown"], ["-o", str(html)]):
        cold, before = _report(cache, *args)
        first = html.read_text() if "-o" in args else cold
        warm, after = _report(cache, *args)
        second = html.read_text() if "-o" in args else warm
        assert "duckdb" in before and "duckdb" not in after, args
        stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
        assert stamp.sub("", first) == stamp.sub("", second) and len(first) > 1000
