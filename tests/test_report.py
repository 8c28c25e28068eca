"""HTML report and Markdown snippet: rendered by a real headless Chromium (skipped when absent)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from click.testing import CliRunner
from conftest import ROOT, _check_report, browser, fixture, h200_exports, loaded, public_exports, seeded

from nsysql.cli import main

check_report = _check_report()


def _report(tmp_path, path, *extra):
    out = tmp_path / f"{path.stem}.html"
    seeded(path)  # the run's one entry of the export (conftest.seeded): the cold build is tested elsewhere
    r = CliRunner().invoke(main, ["report", str(path), "-o", str(out), *extra])
    assert r.exit_code == 0, r.output
    return out


def test_html_is_self_contained(tmp_path):
    out = _report(tmp_path, fixture("train_small"))
    text = out.read_text()
    assert "<script src=" not in text and 'src="http' not in text  # plotly.js is embedded, no CDN
    assert 'data-expected="6"' in text  # iterations, partition, timeline, kernels, categories, idle
    for heading in (
        "Findings",
        "Iterations",
        "GPU timeline",
        "Top kernels",
        "Kernel categories",
        "Idle time by cause",
        "NVTX ranges",
        "Kernels by range",
        "data-loader bound",
        "2025.3.2.0",
    ):
        assert heading in text


def _plots(text: str) -> list[tuple[str, list, dict]]:
    """(div id, data, layout) of each Plotly.newPlot call of a report, its arguments parsed as JSON."""
    dec, out = json.JSONDecoder(), []
    for m in re.finditer(r"Plotly\.newPlot\(\s*", text):
        args, i = [], m.end()
        for _ in range(3):  # id, data, layout (then the config)
            value, i = dec.raw_decode(text, i)
            args.append(value)
            i = re.compile(r"\s*,\s*").match(text, i).end()
        out.append(tuple(args))
    return out


@pytest.mark.parametrize(
    "path", [fixture("train_small"), fixture("loop_before")] + h200_exports(), ids=lambda p: p.stem
)
def test_every_chart_holds_one_plot_of_json_data(tmp_path, path):
    """What the browser check below draws, on every export: each chart div holds one Plotly.newPlot call of its
    own id whose data and layout are JSON, each trace of a type plotly.js draws, as many as the status expects."""
    text = _report(tmp_path, path).read_text()
    keys = re.findall(r'<div class="nsysql-chart" data-chart="([^"]+)">', text)
    expected = int(re.search(r'id="nsysql-status" data-expected="(\d+)"', text).group(1))
    plots = _plots(text)
    assert len(keys) == expected >= 1
    assert [div for div, _, _ in plots] == [f"chart-{k}" for k in keys]
    # each drawn in plotly_white, as plotly writes that template where a figure names it (charts.themed adds it
    # as a chart is written, not as it is built)
    white = json.loads(pio.to_json(go.Figure(layout={"template": "plotly_white"})))["layout"]["template"]
    for _, data, layout in plots:
        assert data and all(isinstance(t.get("type"), str) for t in data) and isinstance(layout, dict)
        assert layout["template"] == white


def test_a_loop_longer_than_the_chart_is_drawn_in_buckets(tmp_path):
    """train_small's 19-iteration window repeated 40 times (benchmarks/gen_scaled.py) is a loop of 761 `Batch`
    iterations, more than the iteration chart's 600 bars: it is drawn as means of 2 consecutive iterations, one
    bar per bucket, and says so. The iterations carry a text column besides the name (the step's clock), which
    has no mean: the report used to stop there with a traceback."""
    import subprocess

    src = tmp_path / "long_loop.sqlite"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gen_scaled.py"), str(fixture("train_small")), str(src)]
    subprocess.run([*cmd, "--copies", "40", "--kernels", "1"], check=True, capture_output=True, timeout=120)
    n = loaded(str(src)).iterations().height
    assert n == 761
    text = _report(tmp_path, src).read_text()
    assert f"{n:,} iterations shown as means of 2 consecutive iterations." in text
    _, data, _ = next(p for p in _plots(text) if p[0] == "chart-iterations")
    assert {len(t["x"]) for t in data if t["type"] == "bar"} == {(n + 1) // 2}


# In Chromium, through scripts/check_report.py with its screenshot: h200 `threads` (no idle chart, four). The
# project's own train_small is drawn at two widths by test_report_layout.py, which reads the same status (every
# chart drawn, no script error) in one browser run with the other reports; the other exports' reports come from
# the same code and get the check above.
@pytest.mark.long
@pytest.mark.browser
@pytest.mark.parametrize("path", [p for p in h200_exports() if p.name == "threads.sqlite"], ids=lambda p: p.stem)
def test_renders_in_chromium(tmp_path, path):
    if browser() is None:
        pytest.skip("chromium not installed")
    out = _report(tmp_path, path)
    res = check_report.check(out, tmp_path / "shot.png", height=1200)
    assert res["ok"], res
    assert res["charts"] == res["expected"] >= 1 and res["errors"] == 0
    assert (tmp_path / "shot.png").stat().st_size > 10_000


# The diff page (`report NEW --baseline BASE`) is drawn in Chromium by test_report_layout.py (loop_diff): all 8
# charts drawn, no script error, with the other reports in one browser run.


def test_report_without_nvtx(tmp_path):
    """A profile without iterations still gets a report; the section says why."""
    from nsysql.errors import NsysqlError

    for p in public_exports():  # where $NSYSQL_TEST_EXPORTS says they are, as every test over them
        prof = loaded(str(p))
        try:
            prof.iterations()
        except NsysqlError:
            out = _report(tmp_path, p)
            assert "No iteration breakdown:" in out.read_text()
            return
    pytest.skip("no export without iterations present")


def test_markdown_snippet():
    r = CliRunner().invoke(main, ["report", str(fixture("train_small")), "-f", "markdown"])
    assert r.exit_code == 0, r.output
    md = r.stdout
    assert md.startswith("#### nsysql: `train_small.sqlite`")
    assert "**Top 10 kernels**" in md and "| kernel | count | total_ms | avg_us | pct |" in md
    assert "20 x `Batch` (wrapper)" in md
    assert "| `host:Load data` | 19 |" in md
    assert "- **data-loader bound**" in md


def test_png_without_kaleido_says_how(tmp_path):
    if importlib.util.find_spec("kaleido") is not None:
        pytest.skip("kaleido installed")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(fixture("train_small")), "-o", str(out), "--png", str(tmp_path / "p")])
    assert r.exit_code == 0 and out.exists()
    assert "pip install kaleido" in r.stderr


@pytest.mark.browser
def test_png_with_kaleido_writes_every_chart(tmp_path):
    if importlib.util.find_spec("kaleido") is None or browser() is None:
        pytest.skip("kaleido or chromium not installed")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(fixture("train_small")), "-o", str(out), "--png", str(tmp_path / "p")])
    assert r.exit_code == 0, r.stderr
    pngs = sorted(p.name for p in (tmp_path / "p").glob("*.png"))
    assert pngs == ["categories.png", "idle.png", "iterations.png", "kernels.png", "partition.png", "timeline.png"]
    assert all((tmp_path / "p" / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in pngs)


def test_png_from_a_kaleido_that_hangs_stops_at_the_limit(tmp_path, monkeypatch):
    """A kaleido whose browser never answers (a stand-in that sleeps, first on the child's path) is stopped after
    $NSYSQL_PNG_TIMEOUT seconds: one line naming the chart it was writing, exit 2; it hung nsysql with it."""
    if importlib.util.find_spec("kaleido") is None:
        pytest.skip("kaleido not installed")
    fake = tmp_path / "fake" / "kaleido"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import time\n\ndef write_fig_from_object_sync(*a, **k):\n    time.sleep(60)\n")
    (fake / "errors.py").write_text("class ChromeNotFoundError(Exception):\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("NSYSQL_PNG_TIMEOUT", "1")
    loaded(str(fixture("train_small")))  # the run's cache holds its entry: the report reads it warm
    out, pngs = tmp_path / "r.html", tmp_path / "p"
    started = time.monotonic()
    r = CliRunner().invoke(main, ["report", str(fixture("train_small")), "-o", str(out), "--png", str(pngs)])
    assert time.monotonic() - started < 30 and r.exit_code == 2 and out.exists(), r.output
    assert r.stderr.strip().splitlines()[-1] == (
        f"nsysql: error: {pngs / 'iterations.png'}: kaleido (a headless Chrome) had not written this chart after "
        "1 s and was stopped (NSYSQL_PNG_TIMEOUT sets the limit); the HTML report was written"
    )


def test_each_report_chooses_its_own_cause_colours():
    """Colours of host:<range> causes are chosen per report: a report built earlier in the same process does not
    move the colours of the next one (two processes: one builds B alone, one builds A and then B)."""
    import subprocess

    script = """
import sys
import nsysql
from nsysql.report import build
for path in sys.argv[1:-1]:
    build(nsysql.load(path))
figures = build(nsysql.load(sys.argv[-1]))[1]
for key in ("timeline", "idle"):
    print(key, [(t.name, t.marker.color) for t in figures[key].data if t.type == "bar"])
"""
    a, b = str(ROOT / "fixtures" / "ddp_pair" / "rank0.sqlite"), str(fixture("loop_before"))
    seeded(a, b)  # the processes load from the run's cache ($NSYSQL_CACHE_DIR): its one entry of each, not cold
    alone, after = (
        subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True, check=True).stdout
        for paths in ([b], [a, b])
    )
    assert "host:" in alone and alone == after
