"""One self-contained HTML page (plotly.js embedded, works offline) from a Profile's analyses."""

from __future__ import annotations

import html as _html
import re
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from .. import __version__
from ..analyses.iterations import steady_sentence
from ..errors import NsysqlError
from . import charts

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
    numeric = [df.schema[c].is_numeric() for c in cols]
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
        self.figures[key] = fig
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{key}",
            config={"displaylogo": False, "responsive": True},
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


def _fact(k: str, v: str, d: str = "") -> str:
    v = charts.bounded(v)
    return (
        f'<div class="fact"><div class="k">{esc(k)}</div><div class="v" title="{esc(v)}">{esc(v)}</div>'
        + (f'<div class="d">{esc(d)}</div>' if d else "")
        + "</div>"
    )


def _facts(prof, summ: dict, stats: pl.DataFrame | None) -> str:
    from ..analyses.summary import MIN_ACTIVE_NS

    f = prof.facts
    one = lambda k, d=None: (f.get(k) or [d])[0]  # noqa: E731
    gpus = summ["gpus"]
    cards = [
        _fact("nsys", one("nsys_version", "unknown")),
        _fact("span", f"{span / 1e9:,.3f} s" if (span := int(one("span_ns") or 0)) else "unknown"),
    ]
    if gpus.height:
        names = sorted(set(n or "GPU" for n in gpus["device"].to_list()))
        cards.append(_fact("GPUs", f"{gpus.height} × {names[0]}" if len(names) == 1 else ", ".join(names)))
        busy = gpus["busy_ns"].sum() / max(gpus["active_ns"].sum(), 1) * 100
        if gpus["active_ns"].sum() < MIN_ACTIVE_NS:
            cards.append(
                _fact("GPU busy", "—", f"{gpus['busy_ns'].sum() / 1e3:.1f} us of GPU time: too little for a share")
            )
        else:
            cards.append(_fact("GPU busy", f"{busy:.1f}%", "whole profile: of the GPUs' active span"))
    else:
        cards.append(_fact("GPUs", "none used"))
    return '<div class="facts">' + "".join(_step_cards(prof, stats) + cards) + "</div>"


def _step_cards(prof, stats: pl.DataFrame | None) -> list[str]:
    """The headline first (summary's step fact, as cards): the median steady-state step on its clock, and over
    the steady-state steps' time the GPU's busy and idle shares, the idle in gaps >= 1 ms apart."""
    from ..analyses.iterations import duration
    from ..analyses.summary import headline

    if stats is None or not stats["steady"][0]:
        return []
    try:
        its, gaps = prof.iterations(), (prof.gaps() if prof.summary()["gpus"].height else None)
    except NsysqlError:
        its, gaps = None, None
    h = headline(stats, its, gaps)
    where = (
        f"median on the GPU; the CPU runs ahead, by up to {duration(h['cpu_lead_ns'] or 0)}"
        if h["step_clock"] == "gpu"
        else "median, steady state"
    )
    cards = [_fact("step", duration(h["median_ns"]), where)]
    total, idle = h["steady_ns"], h.get("steady_idle_ns")
    if idle is not None and total:
        cards.append(
            _fact("GPU busy / step", f"{100 * (total - idle) / total:.1f}%", "of the steady-state steps' time")
        )
        big = h.get("idle_gaps_1ms_ns")
        cards.append(
            _fact(
                "GPU idle / step",
                f"{100 * idle / total:.1f}%",
                f"{100 * big / total:.1f}% in gaps >= 1 ms" if big is not None else "of the steady-state steps' time",
            )
        )
    return cards


def _findings(df: pl.DataFrame) -> str:
    if df.height == 0:
        return '<p class="why">No finding: none of the rules fired (see nsysql.analyses.findings).</p>'
    return (
        '<ul class="findings">'
        + "".join(
            f"<li><b>{inline_code(r['finding'])}</b>{_headroom(r)}{inline_code(charts.bounded(r['evidence']))}</li>"
            for r in df.iter_rows(named=True)
        )
        + "</ul>"
    )


def _headroom(r: dict) -> str:
    """A finding's headroom beside its name, with how it was estimated as the tooltip."""
    if r.get("headroom_ms") is None:
        return ""
    overlap = "; overlaps the findings above" if not r["additive"] else ""
    text = f"{r['headroom_ms']:,.2f} ms per iteration ({r['headroom_pct']:.1f}% of the step{overlap}) "
    return f'<span class="headroom" title="{esc(charts.bounded(r["headroom_basis"]))}">{esc(text)}</span>'


def _iterations(prof):
    try:
        return prof.iterations(), prof.iteration_stats(), None
    except NsysqlError as e:
        return None, None, str(e)


def _elsewhere(prof) -> str:
    """Per idle cause, the top activities of the other threads and processes during its gaps (gap_activity)."""
    try:
        act = prof.gap_activity(by="cause", top=5)
    except NsysqlError as e:
        return f'<p class="why">Nothing to show: {inline_code(charts.bounded(str(e)))}.</p>'
    if act.height == 0:
        return '<p class="why">No other thread or process was traced during these gaps.</p>'
    note = (
        '<p class="note">What every other thread and process did during each cause\'s gaps: the innermost NVTX '
        "range per thread, OS runtime and CUDA calls, ranked by the time they overlap the gaps; waits (poll, "
        "condition variables, synchronize) rank after work. Rules: queries/v1/analyses/gap_activity.sql.</p>"
    )
    cols = ["cause", "place", "pid", "process", "thread", "kind", "domain", "activity", "waiting", "pct_of_idle"]
    return note + table(act.select(cols), name_cols=("activity", "cause"), scroll=False)


# GPUs drawn on the timeline at most: each costs two queries and a trace of ~1,500 points (an export whose kernels
# claimed hundreds of device ids made a report of tens of MB, slowly); the busiest are drawn and the note says
# what was left out
MAX_DEVICES_DRAWN = 16


def drawn_devices(gpus: pl.DataFrame) -> tuple[list[int] | None, str]:
    """The devices the timeline draws (None: every one) and the sentence saying which were left out."""
    if gpus.height <= MAX_DEVICES_DRAWN:
        return None, ""
    top = gpus.sort(["busy_ns", "device_id"], descending=[True, False], nulls_last=True).head(MAX_DEVICES_DRAWN)
    busy = gpus["busy_ns"].sum()
    share = f" ({top['busy_ns'].sum() / busy:.0%} of all GPU busy time)" if busy else ""
    note = (
        f"{gpus.height:,} GPUs ran work; the {MAX_DEVICES_DRAWN} busiest are drawn{share}, the other "
        f"{gpus.height - MAX_DEVICES_DRAWN:,} left out (nsysql summary lists every GPU)."
    )
    return sorted(top["device_id"].to_list()), note


def profile_sections(page: Page, prof, prefix: str = "") -> None:
    """Every section of the single-profile report."""
    summ = prof.summary()
    its, stats, why = _iterations(prof)
    palette: dict[str, str] = {}  # this report's name colours, shared by all its charts (charts.name_colors)
    top = summ["facts"].filter(pl.col("key") == "fix_first")
    if top.height:  # the finding that would give back most time per iteration: the report's first line
        label, text = top.row(0, named=True)["item"].capitalize(), charts.bounded(top["value"][0])
        page.add(f'<div class="verdict bad" id="fix-first">{inline_code(label)}: {inline_code(text)}</div>')
    page.add(_facts(prof, summ, stats))
    page.add(page.section("Findings", _findings(summ["findings"])))

    _iterations_section(page, its, stats, why, palette, prefix)
    gpus = summ["gpus"]
    _timeline_section(page, prof, gpus, its, palette, prefix)
    _kernels_and_idle(page, prof, summ, gpus, palette, prefix)
    _range_sections(page, prof)
    if summ["memory"].height:
        page.add(page.section("Memory operations", table(summ["memory"], scroll=False)))
    page.add(page.section("Profile facts", table(summ["facts"].select("item", "value"), name_cols=(), scroll=False)))


def _iterations_section(page: Page, its, stats, why: str, palette: dict, prefix: str) -> None:
    """The iterations chart and sentence, or why there is none."""
    if its is not None:
        fig, note = charts.iterations_chart(its, palette)
        s = stats.row(0, named=True)
        line = (
            f"{s['iterations']} iterations of `{s['range']}` ({s['mode']}), {s['warmup']} warm-up (shaded); "
            + steady_sentence(s)
            + ". "
            + (f"Outliers: {s['outlier_pattern']}. " if s["outlier_pattern"] else "No outliers. ")
            + f"Detected: {s['detected']}."
        )
        parts, parts_note = charts.partition_chart(its)
        page.add(
            page.section(
                "Iterations",
                page.chart(prefix + "iterations", fig, note)
                + f'<p class="note">{inline_code(charts.short(line, 3 * charts.NAME_MAX))}</p>'
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
    else:
        page.add(
            page.section(
                "Iterations", f'<p class="why">No iteration breakdown: {inline_code(charts.bounded(why))}.</p>'
            )
        )


def _timeline_section(page: Page, prof, gpus: pl.DataFrame, its, palette: dict, prefix: str) -> None:
    """The GPU timeline over the iterations (else the whole active span), idle gaps by cause, and GPU metrics where
    sampled."""
    if gpus.height:
        try:
            g = prof.gaps()
        except NsysqlError:
            g = None
        window = None
        if its is not None and its.height and its["end_ns"].max() > its["start_ns"].min():
            window = (int(its["start_ns"].min()), int(its["end_ns"].max()))
        drawn, left_out = drawn_devices(gpus)
        tl = (
            prof.timeline(start_ns=window[0], end_ns=window[1], devices=drawn)
            if window
            else prof.timeline(devices=drawn)
        )
        if drawn is not None and g is not None:
            g = g.filter(pl.col("device_id").is_in(drawn))
        if window and g is not None:
            g = g.filter((pl.col("end_ns") > window[0]) & (pl.col("start_ns") < window[1])).with_columns(
                start_ns=pl.col("start_ns").clip(lower_bound=window[0]),
                end_ns=pl.col("end_ns").clip(upper_bound=window[1]),
            )
            g = g.with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"))
        fig, note = charts.timeline_chart(tl, g, gpus, palette, "the first iteration" if window else "the first GPU op")
        if window:
            active = gpus["active_ns"].max() / 1e9
            note = (
                f"Shown: the {its.height} iterations ({(window[1] - window[0]) / 1e9:.3f} s of the GPU's "
                f"{active:.3f} s active span). " + note
            ).strip()
        body = page.chart(prefix + "timeline", fig, f"{note} {left_out}".strip())
        t0, t1 = int(tl["start_ns"].min()), int(tl["end_ns"].max())
        m = prof.metrics_timeline(t0, t1) if t1 > t0 else None
        if m is not None and drawn is not None:
            m = m.filter(pl.col("device_id").is_in(drawn))
        if m is not None and m.height:  # only where the export sampled GPU metrics
            origin = "the first iteration" if window else "the first GPU op"
            body += page.chart(prefix + "metrics", charts.metrics_chart(m, t0, t1, origin, palette))
        page.add(page.section("GPU timeline", body))
    else:
        page.add(
            page.section(
                "GPU timeline", '<p class="why">No GPU work in this profile, so there is no timeline to draw.</p>'
            )
        )


def _kernels_and_idle(page: Page, prof, summ: dict, gpus: pl.DataFrame, palette: dict, prefix: str) -> None:
    """Top kernels and categories beside idle time by cause and the work elsewhere meanwhile."""
    left, right = [], []
    k = summ["kernels"]
    if k.height:
        left.append(page.section("Top kernels", page.chart(prefix + "kernels", charts.kernels_chart(k))))
        left.append(
            page.section(
                "Kernel categories",
                page.chart(
                    prefix + "categories",
                    charts.categories_chart(prof.kernels(by="category")),
                    "Categories by kernel name (rules: queries/v1/canonical/44_kernel_rules.sql); tensor-core use "
                    "by GPU metrics where the export has them (Tensor Active during the kernel), else by name.",
                ),
            )
        )
    else:
        left.append(page.section("Top kernels", '<p class="why">No kernels in this profile.</p>'))
    idle = summ.get("idle by cause")
    if idle is not None and idle.height:
        right.append(
            page.section(
                "Idle time by cause",
                page.chart(prefix + "idle", charts.idle_chart(idle, palette)) + table(idle, scroll=False),
            )
        )
        right.append(page.section("While the GPU waited: work elsewhere", _elsewhere(prof)))
    else:
        why_idle = "no GPU work" if not gpus.height else "no gap of 1 ms or more"
        right.append(page.section("Idle time by cause", f'<p class="why">Nothing to show: {why_idle}.</p>'))
    page.add('<div class="grid2">' + "".join(left) + "".join(right) + "</div>")


def _range_sections(page: Page, prof) -> None:
    """NVTX ranges, kernels by range and PyTorch operators, or why there are none."""
    rg = prof.ranges()
    if rg.height:
        page.add(page.section("NVTX ranges", table(rg.sort("total_ns", descending=True), limit=100)))
        kbr = prof.kernels_by_range()
        page.add(
            page.section(
                "Kernels by range",
                table(kbr.sort("total_ns", descending=True), limit=100)
                if kbr.height
                else '<p class="why">No kernel was launched inside an NVTX range.</p>',
            )
        )
        try:
            ops = prof.ops()
        except NsysqlError:  # no emit_nvtx ranges: no section
            ops = None
        if ops is not None:
            page.add(page.section("PyTorch operators", table(ops, limit=100)))
    else:
        page.add(
            page.section(
                "NVTX ranges",
                '<p class="why">No NVTX ranges: the profile was captured without '
                "-t nvtx, or the program has no NVTX annotations.</p>",
            )
        )


def build(prof) -> tuple[str, dict]:
    page = Page(f"nsysql report · {prof.path.name}", str(prof.path))
    profile_sections(page, prof)
    return page.render(), page.figures


def build_diff(base, new) -> tuple[str, dict]:
    res = base.diff(new)
    page = Page(f"nsysql diff · {base.path.name} → {new.path.name}", f"BASE {base.path}  ·  NEW {new.path}")
    it = res.iteration_time
    cls = "same"
    if res.significant:
        cls = "good" if it["delta"][0] < 0 else "bad"
    page.add(f'<div class="verdict {cls}">{inline_code(res.headline)}</div>')
    page.add(page.section("Verdict", table(res.verdict(headline=False), name_cols=(), scroll=False)))
    if it is not None:
        tb, tn = _steady(base), _steady(new)
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
    profile_sections(page, new, prefix="new-")
    return page.render(), page.figures


def _steady(prof) -> pl.Series | None:
    try:
        its = prof.iterations()
    except NsysqlError:
        return None
    return its.filter(~pl.col("warmup"))["wall_ns"]


def write_pngs(figures: dict, directory: Path) -> list[Path] | str:
    """Each chart as DIR/<name>.png through kaleido; a one-line hint (str) when kaleido or Chrome is missing."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return (
            "--png needs kaleido and a Chrome/Chromium: pip install kaleido (then `plotly_get_chrome`, "
            "or install chromium); the HTML report was written"
        )
    import plotly.io as pio

    directory.mkdir(parents=True, exist_ok=True)
    out = [directory / f"{name}.png" for name in figures]
    heights = [fig.layout.height or 400 for fig in figures.values()]
    try:
        if hasattr(pio, "write_images"):  # plotly >= 6.1: every chart through one browser, not one browser each
            pio.write_images(list(figures.values()), out, width=1200, height=heights, scale=1)
        else:
            for p, fig, h in zip(out, figures.values(), heights):
                fig.write_image(str(p), width=1200, height=h, scale=1)
    except Exception as e:  # kaleido present but no usable browser
        return f"--png failed ({str(e).splitlines()[0][:160]}): install chromium or run `plotly_get_chrome`"
    return out
