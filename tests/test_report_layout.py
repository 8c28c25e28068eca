"""The HTML report at any width, as a real headless Chromium lays it out (skipped where Chromium is missing, as on
CI runners without it): at 1400 and 900 px no chart legend covers a title, an axis label or the plot, and no table
cell breaks a word across lines ("Forwar d Pass"); and every chart is drawn with no script error (the report's own
status, as scripts/check_report.py reads it).

How: a checker script is injected into a copy of the report; after the charts are drawn it measures the legend,
title and label boxes of every chart and, in every wrapped table cell, where each line break falls, and writes its
verdict into the DOM, and posts it to a host page that holds every case in an iframe of its width, read back with
one `chromium --headless --dump-dom` for all. Screenshots at both widths are kept in
$NSYSQL_REPORT_SHOTS (a folder) when it is set, named <fixture>-<width>.png."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import browser, fixture, seeded
from test_report import check_report

from nsysql.cli import main

pytestmark = [pytest.mark.long, pytest.mark.browser]

WIDTHS = (1400, 900)

# After load (and plotly's drawing): every chart's legend against its title, axis titles, tick labels,
# annotations and plot areas, and every table cell's line breaks. A break between two letters or digits is a
# word broken in two; a break after a separator (space, `_`, `::`, `,`, `(`) is not.
CHECKER = r"""
window.addEventListener('load', function () { setTimeout(function () {
  var out = {legends: 0, cells: 0, wrapped: 0, overlaps: [], broken: [], width: window.innerWidth,
             height: document.documentElement.scrollHeight};
  function box(el) { var r = el.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom}; }
  function meets(a, b) {
    return Math.min(a.r, b.r) - Math.max(a.l, b.l) > 1 && Math.min(a.b, b.b) - Math.max(a.t, b.t) > 1;
  }
  var others = [['g[class^="g-"][class$="title"] text', 'title'], ['.xtick text, .ytick text', 'tick label'],
                ['.annotation', 'annotation'], ['.nsewdrag', 'plot area']];
  document.querySelectorAll('.nsysql-chart').forEach(function (c) {
    var key = c.getAttribute('data-chart'), svg = c.querySelector('.main-svg');
    c.querySelectorAll('g.legend').forEach(function (lg) {
      var L = box(lg);
      if (L.r - L.l < 1 || L.b - L.t < 1) return;
      out.legends++;
      var S = box(svg);
      if (L.l < S.l - 1 || L.r > S.r + 1 || L.t < S.t - 1 || L.b > S.b + 1)
        out.overlaps.push(key + ': legend outside the chart');
      others.forEach(function (o) {
        c.querySelectorAll(o[0]).forEach(function (el) {
          var B = box(el);
          if (B.r - B.l >= 1 && B.b - B.t >= 1 && meets(L, B))
            out.overlaps.push(key + ': legend covers ' + o[1] + ' "' + (el.textContent || '').slice(0, 60) + '"');
        });
      });
    });
  });
  var word = /[\p{L}\p{N}]/u, range = document.createRange();
  document.querySelectorAll('td, th').forEach(function (cell) {
    out.cells++;
    range.selectNodeContents(cell);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (r) { if (r.width) tops[Math.round(r.top)] = 1; });
    if (Object.keys(tops).length < 2) return;
    out.wrapped++;
    // last: the character before this one (a space at a line's end has no box, yet separates the words);
    // top: where the last character with a box was drawn
    var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), node, last = null, top = null;
    while ((node = walk.nextNode())) {
      for (var i = 0; i < node.data.length; i++) {
        var ch = node.data[i];
        range.setStart(node, i); range.setEnd(node, i + 1);
        var rs = range.getClientRects();
        if (rs.length && rs[0].width) {
          if (top !== null && rs[0].top > top + 2 && word.test(last) && word.test(ch))
            out.broken.push(cell.textContent.slice(0, 80) + ' (between "' + last + '" and "' + ch + '")');
          top = rs[0].top;
        }
        last = ch;
      }
    }
  });
  // the report's own status (nsysql/report/html.py, written 300 ms after load): charts drawn, script errors
  var st = document.getElementById('nsysql-status');
  out.status = st && {expected: +st.getAttribute('data-expected'), charts: +st.getAttribute('data-charts'),
                      drawn: +st.getAttribute('data-drawn'), errors: +st.getAttribute('data-errors'),
                      error_text: st.getAttribute('data-error-text')};
  var m = document.createElement('div');
  m.id = 'nsysql-layout';
  m.setAttribute('data-verdict', JSON.stringify(out));
  document.body.appendChild(m);
  if (window.parent !== window) window.parent.postMessage({name: window.name, verdict: out}, '*');
}, 600); });
"""

# The page that holds every checked copy (layouts()): each copy's verdict, by its frame's name, once all came
HOST = r"""<!DOCTYPE html><html><body style="margin:0"><div style="display:flex">{frames}</div><script>
var got = {};
window.addEventListener('message', function (e) {
  got[e.data.name] = e.data.verdict;
  if (Object.keys(got).length < {count}) return;
  var m = document.createElement('div');
  m.id = 'nsysql-layouts';
  m.setAttribute('data-verdicts', JSON.stringify(got));
  document.body.appendChild(m);
});
</script></body></html>
"""


def checked(page: Path, width: int) -> Path:
    """A copy of `page` with the checker injected, named for `width`."""
    out = page.with_name(f"{page.stem}.checked-{width}.html")
    out.write_text(page.read_text(encoding="utf-8").replace("</body>", f"<script>{CHECKER}</script></body>"))
    return out


def layouts(pages: dict[str, tuple[Path, int]]) -> dict[str, dict]:
    """The checker's verdict on each page laid out at its width, all in one Chromium run (one browser start
    instead of one per page): a host page holds each checked copy in an iframe of that width, side by side in a
    window wide enough to show them all (none offscreen, where Chromium would defer its drawing); each copy
    posts its verdict to the host, which writes them into its DOM once all have come."""
    host = next(iter(pages.values()))[0].with_name("layouts.html")
    frames = "".join(
        f'<iframe src="{checked(page, w).resolve().as_uri()}" name="{key}" width="{w}" height="1000"'
        ' style="border:0;flex:none"></iframe>'
        for key, (page, w) in pages.items()
    )
    host.write_text(HOST.replace("{frames}", frames).replace("{count}", str(len(pages))), encoding="utf-8")
    total = sum(w for _, w in pages.values())
    p = check_report.run(
        check_report.chromium(), host.resolve().as_uri(), ["--dump-dom", f"--window-size={total},1000"]
    )
    m = re.search(r'<div id="nsysql-layouts" data-verdicts="([^"]*)"', p.stdout)
    assert m, p.stderr[-2000:]
    return json.loads(html.unescape(m.group(1)))


def screenshot(page: Path, width: int, height: int, shot: Path) -> None:
    """The whole page laid out `width` px wide, as a PNG at `shot` (for the docs, where $NSYSQL_REPORT_SHOTS)."""
    shot.parent.mkdir(parents=True, exist_ok=True)
    size = f"--window-size={width},{min(height, 16000)}"
    check_report.run(check_report.chromium(), page.resolve().as_uri(), [f"--screenshot={shot.resolve()}", size])
    assert shot.stat().st_size > 10_000


# What each report is: `report` of a fixture, or `report NEW --baseline BASE` (the diff page)
REPORTS = {
    "train_small": ["train_small"],  # every chart of a profile; legends of phases and idle causes
    "pytorch_nvtx": ["pytorch_nvtx"],  # emit_nvtx: long operator and kernel names in the tables
    "hw_mix": ["hw_mix"],  # the GPU metrics strip
    "loop_diff": ["loop_after", "loop_before"],  # the diff page: iteration comparison, changes, both tables
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Each report, written once for both widths."""
    if browser() is None:
        pytest.skip("chromium not installed (CI may lack it)")
    folder, out = tmp_path_factory.mktemp("reports"), {}
    # the run's one entry per export (the cold build is under test elsewhere): the report adds what it reads
    seeded(*(fixture(n) for names in REPORTS.values() for n in names))
    for name, (new, *base) in REPORTS.items():
        out[name] = folder / f"{name}.html"
        args = ["report", str(fixture(new)), "-o", str(out[name])] + (
            ["--baseline", str(fixture(base[0]))] if base else []
        )
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
    return out


# Both widths for the two reports whose screenshots the docs show; 900 px alone, where legends wrap and columns
# narrow, for the other two (each browser run takes seconds)
CASES = [(name, w) for name in ("train_small", "pytorch_nvtx") for w in WIDTHS] + [("hw_mix", 900), ("loop_diff", 900)]


@pytest.fixture(scope="module")
def verdicts(reports) -> dict[str, dict]:
    """The checker's verdict on every case, from one Chromium run."""
    return layouts({f"{name}-{w}": (reports[name], w) for name, w in CASES})


# One test over every case, not one per case: the cases share one browser run (verdicts), which pytest-xdist
# would otherwise make on each worker that takes a case
def test_no_legend_covers_a_title_and_no_cell_breaks_a_word(reports, verdicts):
    for name, width in CASES:
        _check_case(reports, verdicts, name, width)


def _check_case(reports, verdicts, name, width):
    case = f"{name}-{width}"
    v = verdicts[case]
    shots = os.environ.get("NSYSQL_REPORT_SHOTS")
    if shots:
        screenshot(reports[name], width, v["height"], Path(shots) / f"{case}.png")
    assert v["width"] == width, case
    # every chart drawn, no script error (scripts/check_report.py's check, here at this width)
    st = v["status"]
    assert st and st["errors"] == 0 and st["charts"] == st["drawn"] == st["expected"] >= 1, (case, st)
    if name == "loop_diff":
        assert st["charts"] == 8, case  # the diff page: iteration comparison, changes, and the NEW profile's 6 charts
    assert v["legends"] >= 3 and v["cells"] >= 200, (case, v)  # the check saw the charts' legends and the tables
    assert (v["overlaps"], v["broken"][:10]) == ([], []), case
