"""One self-contained HTML page (plotly.js embedded, works offline), drawn from the report's data (Profile.report)."""

from __future__ import annotations

import html as _html
import re
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from .. import __version__
from . import charts
from .markdown import overlapped

CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#e3e6ec; --bg:#f6f7f9; --card:#fff; --accent:#4C78A8; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
       font:14px/1.45 Inter, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
header { background:#1d2330; color:#fff; padding:18px 28px 16px; }
header h1 { margin:0 0 2px; font-size:20px; font-weight:600; letter-spacing:.2px; }
header .sub { color:#aeb6c4; font-size:12.5px; }
main { max-width:1280px; margin:0 auto; padding:18px 24px 40px; }
.facts { display:grid; grid-template-columns:repeat(auto-fit, minmax(170px, 1fr)); gap:10px; margin:0 0 16px; }
.fact { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 14px; }
.fact .k { color:var(--muted); font-size:11.5px; text-transform:uppercase; letter-spacing:.5px; }
.fact .v { font-size:18px; font-weight:600; margin-top:2px; white-space:nowrap; overflow:hidden;
           text-overflow:ellipsis; }
.fact .d { color:var(--muted); font-size:12px; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 18px;
          margin:0 0 16px; }
section h2 { font-size:16px; margin:0 0 8px; font-weight:600; }
.grid2 { display:grid; grid-template-columns:1fr 1fr; gap:16px; }
.grid2 > section { margin:0; }
@media (max-width: 1000px) { .grid2 { grid-template-columns:1fr; } }
.note { color:var(--muted); font-size:12.5px; margin:4px 0 0; }
.why { color:var(--muted); font-style:italic; }
table { border-collapse:collapse; width:100%; font-size:12.5px; }
th, td { padding:4px 8px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
th { color:var(--muted); font-weight:600; background:#fafbfc; position:sticky; top:0; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
td.name { font-family:ui-monospace, Menlo, Consolas, monospace; font-size:11.5px; }
td, th { word-break:normal; overflow-wrap:normal; }
.scroll { max-height:420px; overflow:auto; border:1px solid var(--line); border-radius:6px; }
.wide { overflow-x:auto; }
code { font-family:ui-monospace, Menlo, Consolas, monospace; font-size:.92em; background:#eef1f5;
       padding:0 3px; border-radius:3px; }
ul.findings { margin:0; padding-left:0; list-style:none; }
ul.findings li { padding:6px 10px; margin:0 0 6px; border-left:4px solid #F58518; background:#fff8f0;
                 border-radius:4px; }
ul.findings b { margin-right:6px; }
ul.findings .headroom { color:var(--muted); margin-right:6px; }
.verdict { font-size:15px; padding:10px 14px; border-radius:6px; margin:0 0 10px; font-weight:600; }
.verdict.good { background:#eaf6e8; border-left:5px solid #54A24B; }
.verdict.bad { background:#fdecea; border-left:5px solid #E45756; }
.verdict.same { background:#eef2f7; border-left:5px solid #4C78A8; }
.yes { color:#2f7d32; font-weight:600; } .no { color:var(--muted); }
footer { color:var(--muted); font-size:12px; text-align:center; margin-top:10px; }
#nsysql-status { display:none; }
"""

ERROR_HOOK = """window.__nsysqlErrors = [];
window.addEventListener('error', function (e) { window.__nsysqlErrors.push(String(e.message || e)); });
window.addEventListener('unhandledrejection', function (e) { window.__nsysqlErrors.push(String(e.reason)); });"""

# after load: how many chart divs got an SVG from plotly, and any JavaScript error, written into the DOM for
# scripts/check_report.py (headless Chromium --dump-dom)
STATUS_SCRIPT = """window.addEventListener('load', function () { setTimeout(function () {
  var divs = document.querySelectorAll('.nsysql-chart'), drawn = 0;
  divs.forEach(function (d) { if (d.querySelector('.main-svg')) drawn++; });
  var m = document.getElementById('nsysql-status');
  m.setAttribute('data-charts', divs.length); m.setAttribute('data-drawn', drawn);
  m.setAttribute('data-errors', window.__nsysqlErrors.length);
  m.setAttribute('data-error-text', window.__nsysqlErrors.join(' | '));
  m.textContent = 'nsysql-report-status charts=' + divs.length + ' drawn=' + drawn +
                  ' errors=' + window.__nsysqlErrors.length;
}, 300); });"""


def esc(x) -> str:
    return _html.escape(str(x), quote=True)


# Where a long name may wrap in a table cell: after these separators (`aten::` `cutlass_80_` `Kernel2<`), never
# inside a word. A cell whose name has no separator where it needs one grows the table, which then scrolls
# sideways, rather than breaking a word in two ("Forwar d Pass").
BREAK_AFTER = re.compile(r"(?<=[_:,;(<\[{/.=|-])(?=[^_:,;(<\[{/.=|\s-])")


def breakable(text: str) -> str:
    """`text` escaped for HTML, with a line-break opportunity (<wbr>) after each separator of a long name."""
    return "<wbr>".join(esc(part) for part in BREAK_AFTER.split(text))


def inline_code(text: str) -> str:
    """`text` escaped for HTML, each pair of backticks (`name`) as a code span, as Markdown shows it; a lone
    backtick stays as it is."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one has no partner and is text
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(f"<code>{breakable(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def fmt_value(col: str, v) -> tuple[str, bool]:
    """Cell text and whether it is numeric. *_ns columns are shown in ms."""
    if v is None:
        return "", False
    if isinstance(v, bool):
        return ("yes" if v else "no"), False
    if isinstance(v, (int, float)):
        if col.endswith("_ns"):
            return f"{v / 1e6:,.3f}", True
        if isinstance(v, float):
            return f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.2f}", True
        return f"{v:,}", True
    return str(v), False


def table(
    df: pl.DataFrame, name_cols: tuple[str, ...] = ("name", "kernel", "cause"), limit: int = 200, scroll: bool = True
) -> str:
    if df.height == 0:
        return '<p class="why">No rows.</p>'
    cols = df.columns
    schema = df.schema  # built anew at each `df.schema`: once, not once a column
    numeric = [schema[c].is_numeric() for c in cols]
    head = "".join(
        f'<th class="{"num" if n else ""}">{esc(c[:-3] + "_ms" if c.endswith("_ns") else c)}</th>'
        for c, n in zip(cols, numeric)
    )
    rows = []
    for r in df.head(limit).iter_rows():
        cells = []
        for c, v in zip(cols, r):
            text, num = fmt_value(c, v)
            cls = "num" if num else ("name" if c in name_cols else "")
            cells.append(f'<td class="{cls}">{esc(text) if num else breakable(charts.bounded(text))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">First {limit} of {df.height:,} rows.</p>' if df.height > limit else ""
    t = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return f'<div class="{"scroll" if scroll else "wide"}">{t}</div>' + more


class Page:
    def __init__(self, title: str, subtitle: str):
        self.title, self.subtitle = title, subtitle
        self.parts: list[str] = []
        self.figures: dict[str, object] = {}

    def chart(self, key: str, fig, note: str = "") -> str:
        import plotly.io as pio

        self.figures[key] = fig
        div = pio.to_html(
            charts.themed(fig),
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{key}",
            config={"displaylogo": False, "responsive": True},
            validate=False,  # validated as it was built (charts.themed)
        )
        return f'<div class="nsysql-chart" data-chart="{esc(key)}">{div}</div>' + (
            f'<p class="note">{inline_code(note)}</p>' if note else ""
        )

    def section(self, title: str, body: str) -> str:
        return f"<section><h2>{esc(title)}</h2>{body}</section>"

    def add(self, html: str) -> None:
        self.parts.append(html)

    def render(self) -> str:
        from plotly.offline import get_plotlyjs

        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="nsysql {__version__}">'
            f"<title>{esc(self.title)}</title><style>{CSS}</style>"
            f"<script>{ERROR_HOOK}</script>"
            f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
            f'<header><h1>{esc(self.title)}</h1><div class="sub">{esc(self.subtitle)}</div></header><main>'
            + "\n".join(self.parts)
            + f"<footer>nsysql {__version__} · {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC · "
            "self-contained: works offline</footer></main>"
            f'<div id="nsysql-status" data-expected="{len(self.figures)}"></div>'
            f"<script>{STATUS_SCRIPT}</script></body></html>\n"
        )


def _fact(k: str, v: str, d: str | None = None) -> str:
    v = charts.bounded(v)
    return (
        f'<div class="fact"><div class="k">{esc(k)}</div><div class="v" title="{esc(v)}">{esc(v)}</div>'
        + (f'<div class="d">{esc(d)}</div>' if d else "")
        + "</div>"
    )


def _findings(df: pl.DataFrame) -> str:
    if df.height == 0:
        return '<p class="why">No finding: none of the rules fired (see nsysql.analyses.findings).</p>'
    return (
        '<ul class="findings">'
        + "".join(
            f"<li><b>{inline_code(r['finding'])}</b>{_headroom(r, overlapped(df, i))}"
            f"{inline_code(charts.bounded(r['evidence']))}</li>"
            for i, r in enumerate(df.iter_rows(named=True))
        )
        + "</ul>"
    )


def _headroom(r: dict, overlap: str = "") -> str:
    """A finding's headroom beside its name, with what it shares (markdown.overlapped) and how it was estimated
    as the tooltip."""
    if r.get("headroom_ms") is None:
        return ""
    overlap = f"; {overlap}" if overlap else ""
    text = f"{r['headroom_ms']:,.2f} ms per iteration ({r['headroom_pct']:.1f}% of the step{overlap}) "
    return f'<span class="headroom" title="{esc(charts.bounded(r["headroom_basis"]))}">{esc(text)}</span>'


def _why(text: str) -> str:
    return f'<p class="why">{inline_code(text)}</p>'


def _elsewhere(data: dict, notes: dict) -> str:
    """Per idle cause, the top activities of the other threads and processes during its gaps (gap_activity)."""
    if "activity" not in data:
        return f'<p class="why">Nothing to show: {inline_code(charts.bounded(notes["activity_why"]))}.</p>'
    act = data["activity"]
    if act.height == 0:
        return '<p class="why">No other thread or process was traced during these gaps.</p>'
    note = (
        '<p class="note">What every other thread and process did during each cause\'s gaps: the innermost NVTX '
        "range per thread, OS runtime and CUDA calls, ranked by the time they overlap the gaps; waits (poll, "
        "condition variables, synchronize) rank after work. Rules: queries/v1/analyses/gap_activity.sql.</p>"
    )
    cols = ["cause", "place", "pid", "process", "thread", "kind", "domain", "activity", "waiting", "pct_of_idle"]
    return note + table(act.select(cols), name_cols=("activity", "cause"), scroll=False)


def profile_sections(page: Page, data: dict, prefix: str = "") -> None:
    """Every section of the single-profile report, from its data (Profile.report)."""
    notes = dict(data["notes"].iter_rows())
    palette: dict[str, str] = {}  # this report's name colours, shared by all its charts (charts.name_colors)
    facts = data["facts"]
    top = facts.filter(pl.col("key") == "fix_first")
    if top.height:  # the finding that would give back most time per iteration: the report's first line
        label, text = top.row(0, named=True)["item"].capitalize(), charts.bounded(top["value"][0])
        page.add(f'<div class="verdict bad" id="fix-first">{inline_code(label)}: {inline_code(text)}</div>')
    page.add('<div class="facts">' + "".join(_fact(*r) for r in data["cards"].iter_rows()) + "</div>")
    page.add(page.section("Findings", _findings(data["findings"])))
    _iterations_section(page, data, notes, palette, prefix)
    _timeline_section(page, data, notes, palette, prefix)
    _kernels_and_idle(page, data, notes, palette, prefix)
    _range_sections(page, data, notes)
    if data["memory"].height:
        page.add(page.section("Memory operations", table(data["memory"], scroll=False)))
    shown = facts.filter(pl.col("key") != "kernels_note")  # said under the kernels chart (notes' kernels_note)
    page.add(page.section("Profile facts", table(shown.select("item", "value"), name_cols=(), scroll=False)))


def _iterations_section(page: Page, data: dict, notes: dict, palette: dict, prefix: str) -> None:
    """The iterations chart and sentence, or why there is none."""
    if "iterations" not in data:
        why = inline_code(charts.bounded(notes["iterations_why"]))
        page.add(page.section("Iterations", f'<p class="why">No iteration breakdown: {why}.</p>'))
        return
    its = data["iterations"]
    fig, note = charts.iterations_chart(its, palette)
    parts, parts_note = charts.partition_chart(its)
    page.add(
        page.section(
            "Iterations",
            page.chart(prefix + "iterations", fig, note)
            + f'<p class="note">{inline_code(charts.short(notes["iterations_line"], 3 * charts.NAME_MAX))}</p>'
            + page.chart(
                prefix + "partition",
                parts,
                (parts_note + " " if parts_note else "")
                + "Each bar is the iteration's wall time on the device, in parts that add up to it: some "
                "compute kernel ran; only communication ran (exposed); only memory copies or sets ran; "
                "nothing ran.",
            ),
        )
    )


def _timeline_section(page: Page, data: dict, notes: dict, palette: dict, prefix: str) -> None:
    """The GPU timeline over the iterations (else the whole active span), idle gaps by cause, and GPU metrics where
    sampled."""
    if "timeline" not in data:
        page.add(page.section("GPU timeline", _why(notes["timeline_why"])))
        return
    tl, origin = data["timeline"], notes["timeline_origin"]
    fig, note = charts.timeline_chart(tl, data.get("timeline_gaps"), data["gpus"], palette, origin)
    if "timeline_shown" in notes:
        note = f"{notes['timeline_shown']} {note}".strip()
    body = page.chart(prefix + "timeline", fig, f"{note} {notes.get('timeline_left_out', '')}".strip())
    if "metrics" in data:  # only where the export sampled GPU metrics
        t0, t1 = int(tl["start_ns"].min()), int(tl["end_ns"].max())
        body += page.chart(prefix + "metrics", charts.metrics_chart(data["metrics"], t0, t1, origin, palette))
    page.add(page.section("GPU timeline", body))


def _kernels_and_idle(page: Page, data: dict, notes: dict, palette: dict, prefix: str) -> None:
    """Top kernels and categories beside idle time by cause and the work elsewhere meanwhile."""
    left, right = [], []
    # CUDA graphs traced whole: GPU time that no kernel chart or table holds
    graphs = f'<p class="note">{inline_code(notes["kernels_note"])}</p>' if notes.get("kernels_note") else ""
    if "categories" in data:
        chart = page.chart(prefix + "kernels", charts.kernels_chart(data["kernels"]))
        left.append(page.section("Top kernels", chart + graphs))
        left.append(
            page.section(
                "Kernel categories",
                page.chart(
                    prefix + "categories",
                    charts.categories_chart(data["categories"]),
                    notes["categories_caption"],
                ),
            )
        )
    else:
        left.append(page.section("Top kernels", _why(notes["kernels_why"]) + graphs))
    if "idle_why" not in notes:
        idle = data["idle by cause"]
        right.append(
            page.section(
                "Idle time by cause",
                page.chart(prefix + "idle", charts.idle_chart(idle, palette)) + table(idle, scroll=False),
            )
        )
        right.append(page.section("While the GPU waited: work elsewhere", _elsewhere(data, notes)))
    else:
        right.append(page.section("Idle time by cause", _why(notes["idle_why"])))
    page.add('<div class="grid2">' + "".join(left) + "".join(right) + "</div>")


def _range_sections(page: Page, data: dict, notes: dict) -> None:
    """NVTX ranges, kernels by range and PyTorch operators, or why there are none."""
    if "ranges" not in data:
        page.add(page.section("NVTX ranges", _why(notes["ranges_why"])))
        return
    page.add(page.section("NVTX ranges", table(data["ranges"], limit=100)))
    kbr = data.get("kernels_by_range")
    body = table(kbr, limit=100) if kbr is not None else _why(notes["kernels_by_range_why"])
    if notes.get("kernels_by_range_note"):  # CUDA graphs traced whole inside the ranges
        body += f'<p class="note">{inline_code(charts.short(notes["kernels_by_range_note"], 3 * charts.NAME_MAX))}</p>'
    page.add(page.section("Kernels by range", body))
    if "ops" in data:
        # CUDA graphs traced whole: GPU time no operator is credited with
        said = f'<p class="note">{inline_code(notes["ops_note"])}</p>' if notes.get("ops_note") else ""
        page.add(page.section("PyTorch operators", table(data["ops"], limit=100) + said))


def build(prof, range: str | None = None) -> tuple[str, dict]:
    """The report of one profile (`range`: its loop, None: detected): its data (Profile.report), drawn."""
    page = Page(f"nsysql report · {prof.path.name}", str(prof.path))
    profile_sections(page, prof.report(range=range))
    return page.render(), page.figures


def build_diff(base, new, range: str | None = None) -> tuple[str, dict]:
    """The comparison of NEW against BASE (`range`: the loop of both, None: each side's detected): its data
    (Profile.report_diff), drawn."""
    got = base.report_diff(new, range=range)
    res = got.diff
    page = Page(f"nsysql diff · {base.path.name} → {new.path.name}", f"BASE {base.path}  ·  NEW {new.path}")
    it = res.iteration_time
    cls = "same"
    if res.significant:
        cls = "good" if it["delta"][0] < 0 else "bad"
    page.add(f'<div class="verdict {cls}">{inline_code(res.headline)}</div>')
    page.add(page.section("Verdict", table(res.verdict(headline=False), name_cols=(), scroll=False)))
    if it is not None:
        tb, tn = got.base_steady, got.new_steady
        body = ""
        if tb is not None and tn is not None:
            body += page.chart("iteration-compare", charts.iteration_compare_chart(tb, tn, "BASE", "NEW"))
        page.add(page.section("Iteration time", body + table(it, name_cols=(), scroll=False)))
    fig = charts.delta_chart(res)
    if fig is not None:
        page.add(page.section("What changed", page.chart("deltas", fig)))
    for df, title in (
        (res.idle, "Idle by cause, per iteration"),
        (res.activity, "Work elsewhere during idle gaps, per iteration"),
        (res.ranges, "NVTX ranges, per iteration"),
        (res.kernels, "GPU ops, per iteration"),
    ):
        if df is not None:
            page.add(page.section(title, table(df, limit=100)))
    page.add('<h2 style="margin:26px 0 10px">NEW profile in detail</h2>')
    profile_sections(page, got.new, prefix="new-")
    return page.render(), page.figures


# A report's charts take kaleido (a headless Chrome) seconds; one that has written none in this long is stuck
PNG_TIMEOUT_S = 300
# The child that writes the PNGs (argv[1]: a JSON file of the charts, their paths and heights): kaleido runs
# there, in a process group of its own, so that a browser that hangs is stopped with it at the time limit
_PNG_CHILD = """
import json, sys
import plotly.io as pio
spec = json.load(open(sys.argv[1], encoding="utf-8"))
figs = spec["figs"]
try:
    if hasattr(pio, "write_images"):  # plotly >= 6.1: every chart through one browser, not one browser each
        pio.write_images(figs, spec["paths"], width=1200, height=spec["heights"], scale=1)
    else:
        for p, fig, h in zip(spec["paths"], figs, spec["heights"]):
            pio.write_image(fig, p, width=1200, height=h, scale=1)
except Exception as e:  # kaleido present but no usable browser
    print((str(e).strip().splitlines() or [type(e).__name__])[0][:160], file=sys.stderr)
    sys.exit(1)
"""


def write_pngs(figures: dict, directory: Path) -> list[Path] | str:
    """Each chart as DIR/<name>.png through kaleido; a one-line hint (str) when kaleido or Chrome is missing.
    Kaleido runs in a child process stopped after $NSYSQL_PNG_TIMEOUT seconds (PNG_TIMEOUT_S; 0: no limit):
    past it, NsysqlError naming the first chart not written."""
    import importlib.util
    import sys
    import tempfile

    from plotly.io.json import to_json_plotly

    from ..errors import NsysqlError
    from ..nsys import capture, last_line, timeout_s

    if importlib.util.find_spec("kaleido") is None:
        return (
            "--png needs kaleido and a Chrome/Chromium: pip install kaleido (then `plotly_get_chrome`, "
            "or install chromium); the HTML report was written"
        )
    limit = timeout_s("NSYSQL_PNG_TIMEOUT", PNG_TIMEOUT_S)
    directory.mkdir(parents=True, exist_ok=True)
    out = [directory / f"{name}.png" for name in figures]
    spec = {
        "figs": [charts.themed(f) for f in figures.values()],
        "paths": [str(p) for p in out],
        "heights": [fig.layout.height or 400 for fig in figures.values()],
    }
    with tempfile.TemporaryDirectory(prefix="nsysql-png-") as tmp:
        (Path(tmp) / "charts.json").write_text(to_json_plotly(spec), encoding="utf-8")
        code, said = capture([sys.executable, "-c", _PNG_CHILD, str(Path(tmp) / "charts.json")], limit)
    if code is None:
        stuck = next((p for p in out if not p.exists()), directory)
        raise NsysqlError(
            f"kaleido (a headless Chrome) had not written this chart after {limit:g} s and was stopped "
            "(NSYSQL_PNG_TIMEOUT sets the limit); the HTML report was written",
            path=str(stuck),
        )
    if code:
        return f"--png failed ({last_line(said, 160)}): install chromium or run `plotly_get_chrome`"
    return out
