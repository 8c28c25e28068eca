"""A new user's first hour, a snippet that survives GitHub (issue 36): names in code spans, cut names marked and
still told apart, findings first, the chart linked from the snippet `nsysql profile` writes."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import craft, fixture, loaded

import nsysql
from nsysql.cli import main

SMALL = fixture("train_small")
FAKE = Path(__file__).resolve().parent / "fake_nsys.py"


def snippet(path=SMALL) -> str:
    r = CliRunner().invoke(main, ["report", "-f", "markdown", str(path)])
    assert r.exit_code == 0, r.output
    return r.stdout


def kernel_cells(text: str) -> list[str]:
    """The first cell of each row of the snippet's kernels table."""
    part = text[text.index("**Top ") :]
    rows = [line for line in part.splitlines() if line.startswith("| `")]
    return [re.match(r"\| (`+ ?)(.*?)( ?`+) \|", row).group(2) for row in rows[:10]]


def test_names_are_code_spans_cut_with_an_ellipsis_and_told_apart():
    """Every kernel name is a code span (GitHub keeps `<unnamed>` inside one); a cut name ends or breaks with `…`,
    and the ten labels are ten different texts whose pieces appear, in order, in their kernel's real name."""
    text = snippet()
    names = loaded(str(SMALL)).kernels(top=10)["name"].to_list()
    labels = kernel_cells(text)
    assert len(labels) == len(names) == 10
    assert len(set(labels)) == 10  # train_small's optimizer kernels share their first 80 characters
    assert len({n[:79] for n in names}) < 10
    for label, name in zip(labels, names):
        if len(name) <= 80:
            assert label == name
            continue
        assert "…" in label and len(label) <= 80
        at = 0
        for piece in filter(None, label.split("…")):
            at = name.index(piece, at) + len(piece)
    assert "<unnamed>" in text and all("<unnamed>" not in line or line.count("`") >= 2 for line in text.splitlines())


def test_findings_come_before_the_facts_and_tables():
    text = snippet()
    at = text.index("**Findings**")
    assert at < text.index("- **steady-state step**") < text.index("**Top 10 kernels**")
    assert "- **periodic slow iterations**" in text[at : text.index("**Profile**")]


def test_a_symptom_says_which_findings_share_its_time(tmp_path):
    """`GPU mostly idle` is a symptom: its headroom is the idle time that the idle-time findings (pool `idle`)
    explain. The snippet said `overlaps the findings above` of it wherever it was, also where nothing above it drew
    on the idle time: mem_growth with every kernel 50 us later (the queue never empty when a kernel starts: no
    launch-bound finding) keeps only a finding about compute time (pool `busy`) above it. It names the findings
    above that share its pool, or says that none names its cause."""
    queued = craft(
        tmp_path / "queued.sqlite",
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 50000, "end" = "end" + 50000',
        source="mem_growth",
    )
    for path, shares in ((queued, []), (fixture("train_small"), ["data-loader bound"])):
        f = nsysql.load(path, cache_dir=tmp_path / "c").findings()
        at = f["finding"].to_list().index("GPU mostly idle")
        assert f.head(at)["finding"].to_list() != []  # findings above it: the old sentence's case
        assert f.head(at).filter(pl.col("pool") == "idle")["finding"].to_list() == shares
        md = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), "report", "-f", "markdown", str(path)])
        assert md.exit_code == 0, md.output
        line = next(x for x in md.stdout.splitlines() if x.startswith("- **GPU mostly idle**"))
        said = f"overlaps {', '.join(shares)}" if shares else "a symptom: no finding names its cause"
        assert f"% of the step, {said}): " in line, line
        # the HTML report says the same beside the headroom
        page = tmp_path / f"{path.stem}.html"
        r = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), "report", str(path), "-o", str(page)])
        assert r.exit_code == 0, r.output
        assert f"% of the step; {said}) </span>" in page.read_text(encoding="utf-8")


def executable(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.mark.skipif(os.name == "nt", reason="the fake nsys is a shell script")
def test_profile_snippet_links_the_chart_it_wrote(tmp_path, monkeypatch):
    """`nsysql profile` writes report.md after the top-10 chart and links that very file (SVG here)."""
    fake = executable(tmp_path / "bin" / "nsys", f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    out = tmp_path / "run"
    program = [sys.executable, "-c", "print('training')"]
    r = CliRunner().invoke(main, ["profile", "--nsys", str(fake), "--out", str(out), "--chart", "svg", "--", *program])
    assert r.exit_code == 0, r.output
    md = (out / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert links == ["top10_kernels.svg"] and (out / links[0]).is_file()
