"""`nsysql bundle`: the folder `nsysql profile` writes (summary, reports, CSVs, top-10 chart), from an export or an
.nsys-rep made earlier. The .nsys-rep is exported by tests/fake_nsys.py standing in for nsys (a copy of
fixtures/train_small), as tests/test_profile_workflow.py does."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import sys

import pytest
from click.testing import CliRunner
from conftest import browser, fixture, reference_csv
from test_profile_workflow import clean_env, fake_nsys  # noqa: F401 - clean_env is a fixture

from nsysql.cli import main

TRAIN = fixture("train_small")
BUNDLE = {"summary.txt", "report.html", "report.md", "kernels.csv", "api.csv", ".nsysql-profile.json"}


def _bundle(*args):
    return CliRunner().invoke(main, ["bundle", *args])


def _csv(path, key, count, total):
    with open(path, newline="") as f:
        return {(row[key], int(row[count]), int(row[total])) for row in csv.DictReader(f)}


def test_bundle_of_an_export_writes_what_profile_writes(tmp_path):
    out = tmp_path / "b"
    r = _bundle(str(TRAIN), "--out", str(out), "--chart", "svg")
    assert r.exit_code == 0, r.output
    assert {p.name for p in out.iterdir()} == BUNDLE | {"top10_kernels.svg"}
    assert (out / "summary.txt").read_text() in r.stdout  # the summary is printed, then where each file went
    assert f"nsysql bundle: {out}/" in r.stdout and all(p.name in r.stdout for p in out.iterdir())
    # the CSVs: nsys stats' cuda_gpu_kern_sum and cuda_api_sum of the same export
    assert _csv(out / "kernels.csv", "name", "count", "total_ns") == _csv(
        reference_csv(TRAIN, "cuda_gpu_kern_sum"), "Name", "Instances", "Total Time (ns)"
    )
    assert _csv(out / "api.csv", "name", "count", "total_ns") == _csv(
        reference_csv(TRAIN, "cuda_api_sum"), "Name", "Num Calls", "Total Time (ns)"
    )
    assert "#### nsysql: `train_small.sqlite`" in (out / "report.md").read_text()
    assert (out / "report.html").read_text().count('class="nsysql-chart"') == 6
    svg = (out / "top10_kernels.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<rect x=") == 10


def test_bundle_of_an_nsys_rep_exports_it_once_and_writes_nothing_beside_it(tmp_path, clean_env, monkeypatch):  # noqa: F811
    fake = fake_nsys(tmp_path / "bin")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    rep = tmp_path / "from-gui" / "run.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"PK\x03\x04 a report nsys would write")
    cache = tmp_path / "cache"
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["--cache-dir", str(cache), "--nsys", str(fake), "bundle", str(rep), "--chart", "svg"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "nsysql-run"  # the default folder, named after the report
    assert {p.name for p in out.iterdir()} == BUNDLE | {"top10_kernels.svg"}
    assert sorted(rep.parent.iterdir()) == [rep]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[:3] for c in calls] == [["export", "--type", "sqlite"]] and calls[0][-1] == str(rep.resolve())
    export = next(cache.glob("run-*.export/run.sqlite"))  # the report's store entry (nsysql.store)
    assert f"{rep} was exported to SQLite by nsys into nsysql's cache, {export}" in r.stderr
    # the same answers as from the export itself (fake nsys exports train_small)
    assert _csv(out / "kernels.csv", "name", "count", "total_ns") == _csv(
        reference_csv(TRAIN, "cuda_gpu_kern_sum"), "Name", "Instances", "Total Time (ns)"
    )
    assert "#### nsysql: `run.sqlite`" in (out / "report.md").read_text()


def test_without_kaleido_the_chart_is_an_svg_and_the_listing_says_why(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", None)  # `import kaleido` raises ImportError, as where it is absent
    r = _bundle(str(TRAIN), "--out", str(tmp_path / "b"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "b" / "top10_kernels.svg").is_file() and not (tmp_path / "b" / "top10_kernels.png").exists()
    assert "as SVG (no PNG: kaleido is not installed (pip install kaleido; it also needs a Chrome" in r.stdout
    r = _bundle(str(TRAIN), "--out", str(tmp_path / "p"), "--chart", "png")
    assert r.exit_code == 0, r.output
    assert "not written: the top-10 kernels chart: no PNG: kaleido is not installed" in r.stdout
    assert not list((tmp_path / "p").glob("top10_kernels.*"))


@pytest.mark.long
@pytest.mark.browser
def test_with_kaleido_and_chromium_the_chart_is_a_png(tmp_path):
    if importlib.util.find_spec("kaleido") is None or browser() is None:
        pytest.skip("kaleido or chromium not installed")
    r = _bundle(str(TRAIN), "--out", str(tmp_path / "b"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "b" / "top10_kernels.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "b" / "top10_kernels.svg").exists()


@pytest.mark.long
def test_bundle_replaces_its_own_files_and_refuses_others(tmp_path):
    out = tmp_path / "b"
    for _ in range(2):  # the second run replaces the first one's files
        r = _bundle(str(TRAIN), "--out", str(out), "--chart", "svg")
        assert r.exit_code == 0, r.output
    (out / "report.md").write_text("my own notes\n")  # changed since: not bundle's any more
    r = _bundle(str(TRAIN), "--out", str(out), "--chart", "svg")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.output
    assert f"{out / 'report.md'}: is there, and no earlier `nsysql profile` wrote it" in r.stderr
    assert (out / "report.md").read_text() == "my own notes\n"
    # the export itself in DIR is input, not an output: bundling it into its own folder is fine
    here = tmp_path / "here"
    here.mkdir()
    shutil.copy(TRAIN, here / "t.sqlite")
    r = _bundle(str(here / "t.sqlite"), "--out", str(here), "--chart", "svg")
    assert r.exit_code == 0, r.output


def test_bundle_of_a_file_that_is_no_export_is_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database\n")
    r = _bundle(str(bad), "--out", str(tmp_path / "b"))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.output
    assert str(bad) in r.stderr
    assert not (tmp_path / "b").exists() and bad.read_text() == "not a database\n"


pytestmark = pytest.mark.skipif(os.name == "nt", reason="the fake nsys is a shell script")
