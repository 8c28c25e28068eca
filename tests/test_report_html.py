"""What the HTML report shows, read from the page `nsysql report` writes (no browser needed): one colour per name
in every chart and report, findings' `names` as code, and emit_nvtx's ranges grouped by operator."""

from __future__ import annotations

import csv
import html
import io
import re

import pytest
from click.testing import CliRunner
from conftest import fixture
from test_report import _plots

from nsysql.cli import main


def _page(tmp_path, path) -> str:
    out = tmp_path / f"{path.stem}.html"
    r = CliRunner().invoke(main, ["report", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


def _colours(text: str) -> dict[str, set[str]]:
    """name -> the colours it is drawn in, over the iterations, timeline and idle charts of a report. An idle cause
    `host:<range>` is the range `<range>` (the cause is that range on the CPU)."""
    got: dict[str, set[str]] = {}

    def add(name, colour):
        got.setdefault(name.removeprefix("host:"), set()).add(colour)

    for div, data, _ in _plots(text):
        key = div.removeprefix("chart-")
        for t in data:
            if key == "iterations" and t["type"] == "bar":
                add(t["name"], t["marker"]["color"])
            elif key == "timeline":
                add(t["name"], t["marker"]["color"] if t["type"] == "bar" else t["line"]["color"])
            elif key == "idle":
                for name, colour in zip(t["y"], t["marker"]["color"]):
                    add(name, colour)
    return got


@pytest.mark.parametrize("pair", [("loop_before", "loop_after"), ("train_small", "big_step")], ids="-".join)
def test_one_colour_per_name_in_every_chart_and_report(tmp_path, pair):
    """A range keeps its colour as an iteration phase, as the idle cause `host:<range>` on the timeline and in the
    idle chart, and in the other report (the two of a before/after pair run the same ranges). Different names of
    one report get different colours."""
    a, b = (_colours(_page(tmp_path, fixture(name))) for name in pair)
    shared = a.keys() & b.keys()
    assert {"forward", "backward"} <= shared or {"Forward Pass", "Load data"} <= shared, shared
    for colours in (a, b):
        assert all(len(c) == 1 for c in colours.values()), colours  # one colour per name across charts
        mine = [next(iter(c)) for c in colours.values()]
        assert len(set(mine)) == len(mine), colours  # no two names alike
    assert {n: a[n] for n in shared} == {n: b[n] for n in shared}


def test_findings_show_names_as_code(tmp_path):
    """Findings write names between backticks (`Load data`); the page shows them as code, with no backtick left."""
    text = _page(tmp_path, fixture("train_small"))
    findings = re.search(r'<ul class="findings">(.*?)</ul>', text, re.S).group(1)
    first = re.search(r'<div class="verdict bad" id="fix-first">(.*?)</div>', text, re.S).group(1)
    for part in (findings, first):
        assert "`" not in html.unescape(re.sub(r"<[^>]+>", "", part))
        assert "<code>Load data</code>" in part


def test_emit_nvtx_ranges_table_is_grouped_by_operator(tmp_path):
    """An emit_nvtx profile names every operator call on its own (`aten::addmm, seq = 5, op_id = 9`): the
    report's NVTX ranges table lists one row per operator, the rows of `nsysql ranges --group-ops`, not one per
    call."""
    path = fixture("pytorch_nvtx")
    text = _page(tmp_path, path)
    section = re.search(r"<h2>NVTX ranges</h2>(.*?)</section>", text, re.S).group(1)
    head = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", section)]
    names = [
        html.unescape(re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", row)[head.index("name")]))
        for row in re.findall(r"<tr>(<td.*?)</tr>", section)
    ]
    rows = int(re.search(r"First (\d+) of ([\d,]+) rows", section).group(2).replace(",", ""))

    def ranges(*switch):
        r = CliRunner().invoke(main, ["ranges", str(path), "--csv", *switch])
        assert r.exit_code == 0, r.output
        return list(csv.DictReader(io.StringIO(r.stdout)))

    grouped, per_call = ranges("--group-ops"), ranges("--no-group-ops")
    assert rows == len(grouped) < len(per_call) / 10
    assert len(names) == 100 and set(names) <= {r["name"] for r in grouped}
    assert not [n for n in names if ", op_id = " in n or ", seq = " in n]
