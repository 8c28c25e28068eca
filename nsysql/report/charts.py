"""Plotly figures from analysis frames. Presentation only: no SQL, no analysis beyond grouping for display."""

from __future__ import annotations

import functools
import math
import zlib

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from ..render import distinct
from .markdown import top_kernels

FONT = "Inter, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
# Fixed colours: the causes that are not a range, the parts of an iteration (PARTS) and tensor-core use
CAUSE_COLORS = {
    "sync": "#E45756",
    "memcpy": "#F58518",
    "alloc": "#B279A2",
    "launch": "#72B7B2",
    "load": "#9D755D",
    "unknown": "#BAB0AC",
    "outside iterations": "#D3D3D3",
}
# Every other name's colour (ranges, GPUs, metrics) comes from this list: twelve hues far apart and four pale ones,
# none of the fixed colours
NAME_COLORS = [
    "#1F77B4",
    "#2CA02C",
    "#9467BD",
    "#E377C2",
    "#17BECF",
    "#BCBD22",
    "#EECA3B",
    "#8C564B",
    "#393B79",
    "#FFBB78",
    "#AEC7E8",
    "#7B4173",
    "#FF9DA6",
    "#98DF8A",
    "#637939",
    "#9EDAE5",
]
MAX_ITERATION_BARS = 600
MAX_GAP_BARS = 1500
MAX_PHASES = 8


def name_colors(names: list[str], palette: dict[str, str]) -> dict[str, str]:
    """One colour per name, in every chart of every report: the fixed colour of a cause that is not a range
    (CAUSE_COLORS), else the colour its name hashes to (crc32: the same in every process and on every machine), a
    `host:<range>` cause coloured as the range itself, so `Load data` is one colour as an iteration phase, as the
    idle cause `host:Load data` and in the next report. `palette` (one per report: a report's colours never
    depend on the reports built before it) remembers each name's colour; a name whose colour another name of the
    report holds already takes the next free one, new names taken in sorted order, so that the choice does not
    depend on the order of the charts' traces."""
    for key in sorted({_color_key(n) for n in names if n not in CAUSE_COLORS} - palette.keys()):
        taken = set(palette.values())
        first = zlib.crc32(key.encode("utf-8", "surrogatepass")) % len(NAME_COLORS)
        free = [NAME_COLORS[(first + i) % len(NAME_COLORS)] for i in range(len(NAME_COLORS))]
        palette[key] = next((c for c in free if c not in taken), free[0])  # all taken: share the hashed one
    return {n: CAUSE_COLORS.get(n) or palette[_color_key(n)] for n in names}


def _color_key(name: str | None) -> str:
    """The name a colour belongs to: an idle cause `host:<range>` is the range's; a missing name is NO_NAME."""
    name = NO_NAME if name is None else name
    return name[len("host:") :] if name.startswith("host:") else name


# Every chart's look: plotly's `plotly_white`, given to a chart as it is written (themed), not as it is built:
# plotly copies and validates a template on each figure it is set on, about half of building a report's charts
TEMPLATE = "plotly_white"


def themed(fig: go.Figure) -> dict:
    """`fig` as plotly.js draws it (data and layout, as JSON-ready dicts), with TEMPLATE's layout in its own
    `template` key, as `template=TEMPLATE` would have set it: for writing without plotly's validation
    (`validate=False`), which the figure passed when it was built."""
    out = fig.to_plotly_json()
    out["layout"] = {**out.get("layout", {}), "template": _template_json(TEMPLATE)}
    return out


@functools.cache
def _template_json(name: str) -> dict:
    import plotly.io as pio

    return pio.templates[name].to_plotly_json()


def _layout(fig: go.Figure, title: str, height: int = 360, **kw) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=15)),
        height=height,
        margin=dict(l=60, r=20, t=48, b=44),
        font=dict(family=FONT, size=12, color="#222"),
        # the legend under the plot, in a strip of the figure's own (yref container: plotly.js reserves its
        # height below the axes): above the plot, a legend that wraps at a narrow width covered the title
        legend=dict(
            orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0.01, font=dict(size=11)
        ),
        hoverlabel=dict(font=dict(family=FONT)),
        **kw,
    )
    return fig


# The longest name a report shows, in a hover or a table cell: CUDA template names run to a few thousand
# characters; an export can hold a name of megabytes, which repeated per chart and table row made reports of
# hundreds of MiB. Longer names are cut (with …): `nsysql kernels -f csv` has them whole.
NAME_MAX = 2000
NO_NAME = "(no name)"  # a name id the export's StringIds lacks


def short(name: str | None, n: int = 60) -> str:
    if name is None:
        return NO_NAME
    return name if len(name) <= n else name[: n - 1] + "…"


def bounded(name: str | None) -> str:
    """A name as the report shows it in full: at most NAME_MAX characters."""
    return short(name, NAME_MAX)


def iterations_chart(its: pl.DataFrame, palette: dict[str, str] | None = None) -> tuple[go.Figure, str]:
    """Stacked bars per iteration: CPU time of each child range (phase) plus the rest of the iteration; GPU idle
    time as a line; warm-up shaded, outliers marked. Long loops are shown in buckets of consecutive iterations.
    Each phase in its colour of the report's `palette` (name_colors)."""
    phases = [c[: -len(" cpu_ns")] for c in its.columns if c.endswith(" cpu_ns")]
    totals = sorted(phases, key=lambda p: -its[f"{p} cpu_ns"].sum())
    shown, rest = totals[:MAX_PHASES], totals[MAX_PHASES:]
    df = its.with_columns(
        other=(pl.col("wall_ns") - pl.sum_horizontal([pl.col(f"{p} cpu_ns") for p in phases] or [pl.lit(0)])).clip(
            lower_bound=0
        ),
    )
    df, bucket, note = _bucketed(df)
    x = df["iteration"].to_list()
    ms = lambda c: (df[c].cast(pl.Float64) / 1e6).to_list()  # noqa: E731
    fig = go.Figure()
    colors = name_colors(shown, {} if palette is None else palette)
    for p in shown:
        fig.add_bar(
            x=x,
            y=ms(f"{p} cpu_ns"),
            name=short(p, 30),
            marker_color=colors[p],
            hovertemplate=f"{bounded(p)}: %{{y:.2f}} ms<extra>iteration %{{x}}</extra>",
        )
    # the phases past MAX_PHASES join the rest (a Series: pl.sum_horizontal over Series is an expression)
    other = df.select(
        pl.sum_horizontal(pl.col("other"), *[pl.col(f"{p} cpu_ns") for p in rest]).cast(pl.Float64)
    ).to_series()
    if other.sum() > 0:
        fig.add_bar(
            x=x,
            y=(other / 1e6).to_list(),
            # the child ranges past iterations' PHASE_COLUMNS have no column of their own: they are in the rest
            name="other ranges / no range"
            if rest or "other_children_cpu_ns" in its.columns
            else "outside child ranges",
            marker_color="#D9D9D9",
            hovertemplate="rest: %{y:.2f} ms<extra>iteration %{x}</extra>",
        )
    fig.add_scatter(
        x=x,
        y=ms("idle_ns"),
        name="GPU idle",
        mode="lines+markers",
        line=dict(color="#E45756", width=1.5),
        marker=dict(size=4),
        hovertemplate="GPU idle: %{y:.2f} ms<extra>iteration %{x}</extra>",
    )
    out = df.filter(pl.col("outlier"))
    if out.height:
        fig.add_scatter(
            x=out["iteration"].to_list(),
            y=(out["wall_ns"].cast(pl.Float64) / 1e6 * 1.04).to_list(),
            mode="markers",
            name="outlier",
            marker=dict(symbol="triangle-down", size=10, color="#222"),
            hovertemplate="outlier: %{y:.2f} ms<extra>iteration %{x}</extra>",
        )
    _warmup_band(fig, df, x, bucket)
    _layout(fig, "Iterations: CPU time per phase, GPU idle", barmode="stack", bargap=0.15)
    fig.update_xaxes(title_text="iteration")
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    if _clip_warmup(fig, df):
        note = (
            note + " " if note else ""
        ) + "The y axis is scaled to the steady state; taller warm-up bars are clipped (their time is written on them)."
    return fig, note


def _bucketed(df: pl.DataFrame) -> tuple[pl.DataFrame, int, str]:
    """A long loop as means of `bucket` consecutive iterations (at most MAX_ITERATION_BARS bars), and the note
    that says so."""
    bucket = max(1, math.ceil(df.height / MAX_ITERATION_BARS))
    if bucket == 1:
        return df, bucket, ""
    note = f"{df.height:,} iterations shown as means of {bucket} consecutive iterations."
    # times are averaged; a flag holds where it holds for one iteration of the bucket; a text column (the name,
    # the step's clock) is the bucket's first iteration's: whatever columns the iterations carry, none is averaged
    # that has no mean
    numeric = [c for c, t in df.schema.items() if t.is_numeric() and c != "iteration"]
    df = (
        df.with_columns(b=pl.col("iteration") // bucket)
        .group_by("b", maintain_order=True)
        .agg(
            pl.col("iteration").first(),
            pl.col(numeric).mean(),
            pl.col("warmup").any(),
            pl.col("outlier").any(),
            pl.all().exclude(*numeric, "iteration", "warmup", "outlier").first(),
        )
    )
    return df, bucket, note


def _clip_warmup(fig: go.Figure, df: pl.DataFrame) -> bool:
    """Where warm-up dwarfs the loop (its tallest bar over 1.5x the steady state's), scale the y axis to the
    steady state and write their time on the clipped bars; whether it did."""
    steady = df.filter(~pl.col("warmup"))
    top = float(steady["wall_ns"].max() or 0) / 1e6
    tallest = float(df["wall_ns"].max() or 0) / 1e6
    if not (steady.height and tallest > 1.5 * top > 0):
        return False
    fig.update_yaxes(range=[0, top * 1.15])
    for r in df.filter(pl.col("wall_ns") / 1e6 > top * 1.15).iter_rows(named=True):
        fig.add_annotation(
            x=r["iteration"],
            y=top * 1.12,
            text=f"{r['wall_ns'] / 1e6:,.0f} ms ↑",
            showarrow=False,
            font=dict(size=10, color="#444"),
            bgcolor="rgba(255,255,255,.8)",
        )
    return True


def _warmup_band(fig: go.Figure, df: pl.DataFrame, x: list, bucket: int) -> None:
    """Shade the warm-up iterations of an iteration chart (`df` as drawn, `x` its iteration axis, `bucket` the
    iterations per bar)."""
    warm = df.filter(pl.col("warmup"))
    if warm.height:
        fig.add_vrect(
            x0=min(x) - 0.5 * bucket,
            x1=warm["iteration"].max() + 0.5 * bucket,
            fillcolor="#999",
            opacity=0.15,
            line_width=0,
            annotation_text="warm-up",
            annotation_position="top left",
            annotation_font_size=11,
        )


# the parts of an iteration's wall time (iterations' compute_ns, exposed_comm_ns, copy_ns, idle_ns), as stacked
PARTS = (
    ("compute_ns", "compute", "#4C78A8"),
    ("exposed_comm_ns", "exposed communication", "#F58518"),
    ("copy_ns", "copy only", "#54A24B"),
    ("idle_ns", "idle", "#E45756"),
)


def partition_chart(its: pl.DataFrame) -> tuple[go.Figure, str]:
    """Stacked bars per iteration: the parts of its wall time on the device (compute, exposed communication,
    copy only, idle), which add up to the wall time. Long loops are shown in buckets, as in iterations_chart."""
    cols = [c for c, _, _ in PARTS]
    df = its.select("iteration", "warmup", *cols)
    note = ""
    bucket = max(1, math.ceil(df.height / MAX_ITERATION_BARS))
    if bucket > 1:
        note = f"{df.height:,} iterations shown as means of {bucket} consecutive iterations."
        df = (
            df.with_columns(b=pl.col("iteration") // bucket)
            .group_by("b", maintain_order=True)
            .agg(pl.col("iteration").first(), pl.col("warmup").any(), *[pl.col(c).mean() for c in cols])
        )
    x = df["iteration"].to_list()
    fig = go.Figure()
    for col, label, color in PARTS:
        if col != "idle_ns" and not (df[col] > 0).any():
            continue  # a part the loop never has (no communication, no copies) takes no legend entry
        fig.add_bar(
            x=x,
            y=(df[col].cast(pl.Float64) / 1e6).to_list(),
            name=label,
            marker_color=color,
            hovertemplate=f"{label}: %{{y:.2f}} ms<extra>iteration %{{x}}</extra>",
        )
    _warmup_band(fig, df, x, bucket)
    _layout(fig, "Iterations: where the wall time went on the GPU", barmode="stack", bargap=0.15)
    fig.update_xaxes(title_text="iteration")
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    steady = df.filter(~pl.col("warmup"))
    wall = df.select(pl.sum_horizontal(cols)).to_series()
    top = float(steady.select(pl.sum_horizontal(cols)).to_series().max() or 0) / 1e6 if steady.height else 0
    if steady.height and float(wall.max() or 0) / 1e6 > 1.5 * top > 0:
        fig.update_yaxes(range=[0, top * 1.15])
        note = (
            note + " " if note else ""
        ) + "The y axis is scaled to the steady state; taller warm-up bars are clipped."
    return fig, note


def timeline_chart(
    tl: pl.DataFrame,
    gaps: pl.DataFrame | None,
    gpus: pl.DataFrame,
    palette: dict[str, str],
    origin: str = "the first GPU op",
) -> tuple[go.Figure, str]:
    """Top: GPU busy % per time bin, per device. Bottom: idle gaps >= 1 ms as bars coloured by cause (colours
    from the report's `palette`, see name_colors)."""
    t0 = tl["start_ns"].min()
    span = (tl["end_ns"].max() - t0) / 1e9
    unit, scale = ("ms", 1e6) if span < 2 else ("s", 1e9)
    has_gaps = gaps is not None and gaps.height > 0
    rows = 2 if has_gaps else 1  # no idle row to draw: the busy row alone, with the time axis under it
    fig = make_subplots(
        rows=rows, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4] if has_gaps else None, vertical_spacing=0.06
    )
    names = {r["device_id"]: r["device"] or "GPU" for r in gpus.iter_rows(named=True)}
    devices = tl["device_id"].unique().sort().to_list()
    lines = name_colors([f"GPU {dev} busy" for dev in devices], palette)
    for dev in devices:
        d = tl.filter(pl.col("device_id") == dev)
        mid = ((d["start_ns"] + d["end_ns"]) / 2 - t0) / scale
        fig.add_scatter(
            x=mid.to_list(),
            y=d["busy_pct"].fill_null(0).to_list(),
            mode="lines",
            line=dict(width=1, color=lines[f"GPU {dev} busy"], shape="hv"),
            fill="tozeroy",
            name=f"GPU {dev} busy",
            row=1,
            col=1,
            hovertemplate=f"GPU {dev} ({names.get(dev, '')}): %{{y:.0f}}% busy<extra>t=%{{x:.3f}} {unit}</extra>",
        )
    note = "" if has_gaps else "No idle gaps of 1 ms or more."
    if has_gaps:
        g = gaps
        if g.height > MAX_GAP_BARS:
            note = (
                f"{g.height:,} gaps of 1 ms or more; the {MAX_GAP_BARS:,} longest are drawn "
                f"({g.sort('duration_ns', descending=True).head(MAX_GAP_BARS)['duration_ns'].sum() / g['duration_ns'].sum():.0%} of the idle time)."
            )
            g = g.sort("duration_ns", descending=True).head(MAX_GAP_BARS)
        colors = name_colors(
            g.group_by("cause")
            .agg(pl.col("duration_ns").sum())
            .sort("duration_ns", descending=True)["cause"]
            .to_list(),
            palette,
        )
        for cause, color in colors.items():
            c = g.filter(pl.col("cause") == cause)
            fig.add_bar(
                base=((c["start_ns"] - t0) / scale).to_list(),
                x=(c["duration_ns"] / scale).to_list(),
                y=[f"GPU {d} idle" for d in c["device_id"].to_list()],
                orientation="h",
                name=short(cause, 80),
                marker=dict(color=color, line=dict(width=0)),
                row=2,
                col=1,
                customdata=(c["duration_ns"] / 1e6).to_list(),
                hovertemplate=f"{bounded(cause)}: %{{customdata:.1f}} ms<extra>from %{{base:.3f}} {unit}</extra>",
            )
    _layout(
        fig,
        "GPU timeline: busy % and idle gaps (≥ 1 ms) by cause" if has_gaps else "GPU timeline: busy %",
        height=380 if has_gaps else 260,
        barmode="overlay",
        bargap=0.3,
    )
    fig.update_yaxes(title_text="busy %", range=[0, 105], row=1, col=1)
    fig.update_xaxes(title_text=f"{unit} since {origin}", range=[0, (tl["end_ns"].max() - t0) / scale], row=rows, col=1)
    return fig, note


def metrics_chart(m: pl.DataFrame, t0: int, t1: int, origin: str, palette: dict[str, str] | None = None) -> go.Figure:
    """The strip under the GPU timeline: SMs Active and Tensor Active (GPU metrics, as the device named them) per
    device over the same window and time axis (Profile.metrics_timeline); colours from the report's `palette`
    (name_colors)."""
    unit, scale = ("ms", 1e6) if (t1 - t0) / 1e9 < 2 else ("s", 1e9)
    fig = go.Figure()
    series = m.sort("device_id", "metric", "bin").group_by("device_id", "metric", maintain_order=True)
    series = [(f"GPU {dev} {metric}", d) for (dev, metric), d in series]
    colors = name_colors([name for name, _ in series], {} if palette is None else palette)
    for name, d in series:
        fig.add_scatter(
            x=((d["start_ns"] - t0) / scale).to_list(),
            y=d["mean"].to_list(),
            mode="lines",
            line=dict(width=1, color=colors[name], shape="hv"),
            name=name,
            hovertemplate=f"{name}: %{{y:.0f}}%<extra>t=%{{x:.3f}} {unit}</extra>",
        )
    # the counters the export's GPUs sampled, by their names there (Turing's tensor counter also counts fp16)
    said = list(dict.fromkeys(m.sort("metric")["metric"].to_list())) if m.height else ["SMs Active", "Tensor Active"]
    _layout(fig, f"GPU metrics: {' and '.join(said)} %", height=220)
    fig.update_yaxes(title_text="%", range=[0, 105])
    fig.update_xaxes(title_text=f"{unit} since {origin}", range=[0, (t1 - t0) / scale])
    return fig


def kernels_chart(k: pl.DataFrame, top: int = 15) -> go.Figure:
    k = k.head(top).reverse()
    fig = go.Figure(
        go.Bar(
            x=(k["total_ns"] / 1e6).to_list(),
            y=[f"{k.height - i}. {n}" for i, n in enumerate(distinct(k["name"].to_list(), 44, NO_NAME))],
            orientation="h",
            marker_color="#4C78A8",
            customdata=list(zip(map(bounded, k["name"].to_list()), k["count"].to_list(), k["pct"].to_list())),
            text=[f"{p:.1f}%" for p in k["pct"].to_list()],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{customdata[0]}<br>%{x:.2f} ms in %{customdata[1]} launches (%{customdata[2]:.1f}%)<extra></extra>",
        )
    )
    _layout(fig, f"{top_kernels(k.height)} by total GPU time", height=max(260, 90 + 30 * k.height))
    fig.update_layout(margin=dict(l=330, r=50))
    fig.update_yaxes(
        automargin=False,
        tickfont=dict(size=10.5, family="ui-monospace, Menlo, Consolas, monospace"),
        tickmode="linear",
        dtick=1,
    )
    fig.update_xaxes(title_text="ms")
    return fig


TENSOR_CORE_COLORS = {"yes": "#54A24B", "no": "#F58518", "unknown": "#BAB0AC"}


def categories_chart(c: pl.DataFrame) -> go.Figure:
    """Kernel time per category (Profile.kernels(by="category")), each bar split by tensor-core use."""
    order = c.group_by("category").agg(pl.col("total_ns").sum()).sort("total_ns")["category"].to_list()
    fig = go.Figure()
    for tc, color in TENSOR_CORE_COLORS.items():
        part = c.filter(pl.col("tensor_cores") == tc)
        if not part.height:
            continue
        fig.add_trace(
            go.Bar(
                x=(part["total_ns"] / 1e6).to_list(),
                y=part["category"].to_list(),
                orientation="h",
                name=f"tensor cores: {tc}",
                marker_color=color,
                customdata=list(zip(part["count"].to_list(), part["pct"].to_list())),
                hovertemplate="%{y}, tensor cores " + tc + ": %{x:.2f} ms in %{customdata[0]} launches "
                "(%{customdata[1]:.1f}% of kernel time)<extra></extra>",
            )
        )
    _layout(fig, "Kernel time by category and tensor-core use", height=max(220, 100 + 30 * len(order)))
    fig.update_layout(barmode="stack", margin=dict(l=10, r=30))
    fig.update_yaxes(automargin=True, categoryorder="array", categoryarray=order)
    fig.update_xaxes(title_text="ms")
    return fig


def idle_chart(causes: pl.DataFrame, palette: dict[str, str]) -> go.Figure:
    c = causes.reverse()
    colors = name_colors(causes["cause"].to_list(), palette)
    fig = go.Figure(
        go.Bar(
            x=(c["idle_ns"] / 1e6).to_list(),
            y=[short(x, 80) for x in c["cause"].to_list()],
            orientation="h",
            marker_color=[colors[x] for x in c["cause"].to_list()],
            text=[f"{p:.0f}% of idle" for p in c["pct_of_idle"].to_list()],
            textposition="outside",
            cliponaxis=False,
            customdata=c["gaps"].to_list(),
            hovertemplate="%{y}: %{x:.1f} ms in %{customdata} gaps<extra></extra>",
        )
    )
    _layout(fig, "GPU idle time by cause (gaps ≥ 1 ms)", height=max(220, 80 + 34 * c.height))
    fig.update_layout(margin=dict(l=10, r=80))
    fig.update_yaxes(automargin=True)
    fig.update_xaxes(title_text="ms")
    return fig


def iteration_compare_chart(base: pl.Series, new: pl.Series, base_label: str, new_label: str) -> go.Figure:
    """Steady-state iteration times of both profiles: every iteration as a dot, box, mean as a dashed line."""
    fig = go.Figure()
    for s, label, color in ((base, base_label, "#9D9D9D"), (new, new_label, "#4C78A8")):
        fig.add_box(
            y=(s.cast(pl.Float64) / 1e6).to_list(),
            name=label,
            boxpoints="all",
            jitter=0.4,
            pointpos=0,
            boxmean=True,
            marker=dict(color=color, size=5, opacity=0.7),
            line=dict(color=color),
            hovertemplate="%{y:.2f} ms<extra>" + label + "</extra>",
        )
    _layout(fig, "Steady-state iteration time (dots: iterations; dashed: mean)", height=380, showlegend=False)
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    return fig


def delta_chart(result, top: int = 15) -> go.Figure | None:
    """The largest changes per iteration across idle causes, ranges and kernels of a diff (analyses.diff.Diff);
    solid = significant."""
    parts = []
    for df, key, label in (
        (result.idle, "cause", "idle"),
        (result.ranges, "name", "range"),
        (result.kernels, "name", "kernel"),
    ):
        if df is not None and df.height:
            parts.append(
                df.select(
                    pl.concat_str(pl.lit(label + ": "), pl.col(key)).alias("what"),
                    "delta_ns",
                    "significant",
                    "status",
                    "base_ns",
                    "new_ns",
                )
            )
    if not parts:
        return None
    d = pl.concat(parts).sort(pl.col("delta_ns").abs(), descending=True).head(top).reverse()
    sig = d["significant"].fill_null(False).to_list()
    colors = [
        ("#54A24B" if v < 0 else "#E45756") if s else ("#B7D9B1" if v < 0 else "#F2B8B5")
        for v, s in zip(d["delta_ns"].to_list(), sig)
    ]
    fig = go.Figure(
        go.Bar(
            x=(d["delta_ns"] / 1e6).to_list(),
            y=[short(w, 70) for w in d["what"].to_list()],
            orientation="h",
            marker_color=colors,
            customdata=list(
                zip(
                    map(bounded, d["what"].to_list()),
                    (d["base_ns"] / 1e6).to_list(),
                    (d["new_ns"] / 1e6).to_list(),
                    ["significant" if s else "within noise" for s in sig],
                    d["status"].to_list(),
                )
            ),
            hovertemplate="%{customdata[0]}<br>%{customdata[1]:.3f} → %{customdata[2]:.3f} ms per iteration "
            "(%{x:+.3f} ms, %{customdata[3]}, %{customdata[4]})<extra></extra>",
        )
    )
    _layout(
        fig,
        "Largest changes per iteration (green: faster, red: slower; pale: within noise)",
        height=max(260, 70 + 26 * d.height),
    )
    fig.update_layout(margin=dict(l=10, r=30))
    fig.update_yaxes(automargin=True, tickfont=dict(size=11))
    fig.update_xaxes(title_text="Δ ms per iteration (NEW − BASE)", zeroline=True, zerolinecolor="#444")
    return fig
