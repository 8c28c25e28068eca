"""PR-ready Markdown snippets: a few facts, top-10 kernels, the iteration line, idle by cause, findings."""

from __future__ import annotations

import polars as pl

from ..analyses.summary import all_devices_busy
from ..errors import NsysqlError
from ..render import markdown as md_table
from ..render import one_line


def _ms(ns) -> str:
    return f"{ns / 1e6:,.2f}"


def snippet(prof, top: int = 10) -> str:
    s = prof.summary(top=top)
    facts = {key: (item, value) for key, item, value in s["facts"].select("key", "item", "value").iter_rows()}
    value = lambda key, default=None: facts.get(key, (None, default))[1]  # noqa: E731
    gpus = s["gpus"]
    out = [f"#### nsysql: `{prof.path.name}`", ""]
    if value("fix_first"):  # the finding that would give back most time per iteration leads
        out += [f"**{facts['fix_first'][0].capitalize()}**: {value('fix_first')}", ""]
    if value("step"):  # the headline first
        out.append(f"- **steady-state step**: {value('step')}")
    line = f"- **nsys** {value('nsys_version', 'unknown')} · **span** {value('span', '?')}"
    if gpus.height:
        line += f" · **GPUs** {value('gpus')} · **GPU busy (whole profile)** " + all_devices_busy(gpus)
    out.append(line)
    out.append(f"- **iterations**: {value('iterations', 'none')}")
    out += [f"- **{facts[k][0]}**: {facts[k][1]}" for k in ("outliers", "idle") if value(k)]
    ops = ops_line(prof)
    if ops:
        out.append(f"- **PyTorch ops by GPU time**: {ops}")
    out.append("")
    k = s["kernels"]
    if k.height:
        out += [
            f"**Top {k.height} kernels**",
            "",
            md_table(
                k.select(
                    pl.col("name").str.slice(0, 80).alias("kernel"),
                    "count",
                    (pl.col("total_ns") / 1e6).round(3).alias("total_ms"),
                    (pl.col("avg_ns") / 1e3).round(1).alias("avg_us"),
                    pl.col("pct").round(1).alias("pct"),
                )
            ),
            "",
        ]
    idle = s.get("idle by cause")
    if idle is not None and idle.height:
        out += [
            "**GPU idle by cause**",
            "",
            md_table(
                idle.select(
                    "cause",
                    "gaps",
                    (pl.col("idle_ns") / 1e6).round(1).alias("idle_ms"),
                    pl.col("pct_of_idle").round(1),
                    pl.col("pct_of_span").round(1),
                )
            ),
            "",
        ]
    f = s["findings"]
    out.append("**Findings**")
    out.append("")
    out += [f"- **{r['finding']}**{_headroom(r)}: {r['evidence']}" for r in f.iter_rows(named=True)] or ["- none"]
    return _lines(out)


def _headroom(r: dict) -> str:
    """A finding's headroom as the snippet shows it beside its name (nothing where it has none)."""
    if r.get("headroom_ms") is None:
        return ""
    overlap = "" if r["additive"] else ", overlaps the findings above"
    return f" ({r['headroom_ms']:,.2f} ms per iteration, {r['headroom_pct']:.1f}% of the step{overlap})"


def ops_line(prof, top: int = 3) -> str | None:
    """The `top` PyTorch operators by GPU time (forward + backward, from `ops`); None without operator ranges or
    when none launched a kernel."""
    try:
        o = prof.ops()
    except NsysqlError:
        return None
    o = o.filter(pl.col("fwd_gpu_ns") + pl.col("bwd_gpu_ns") > 0).head(top)
    return (
        ", ".join(
            f"`{r['op']}` {(r['fwd_gpu_ns'] + r['bwd_gpu_ns']) / 1e6:,.3f} ms (fwd {r['fwd_gpu_ns'] / 1e6:,.3f} + "
            f"bwd {r['bwd_gpu_ns'] / 1e6:,.3f})"
            for r in o.iter_rows(named=True)
        )
        or None
    )


def _lines(out: list[str]) -> str:
    """The snippet's lines, each shown safely: names from the export (a file's, a range's in a finding) may hold
    control characters or run to megabytes."""
    return "\n".join(one_line(line, 4000) for part in out for line in part.split("\n")) + "\n"


def diff_snippet(base, new, top: int = 10) -> str:
    res = base.diff(new)
    out = [f"#### nsysql diff: `{base.path.name}` → `{new.path.name}`", "", f"**{res.headline}**", ""]
    out += [f"- **{k}**: {val}" for k, val in res.notes.iter_rows()]
    out.append("")
    it = res.iteration_time
    if it is not None:
        out += [
            md_table(
                it.select(
                    "metric",
                    "unit",
                    pl.col("base").round(3),
                    pl.col("base_se").round(3),
                    pl.col("new").round(3),
                    pl.col("new_se").round(3),
                    pl.col("delta").round(3),
                    pl.col("delta_pct").round(1),
                    pl.col("noise").round(3),
                    "significant",
                )
            ),
            "",
        ]
    for df, title in ((res.idle, "Idle by cause"), (res.ranges, "Ranges"), (res.kernels, "GPU ops")):
        if df is None or not df.height:
            continue
        name = df.columns[0]
        unit = "per iteration" if it is not None else "whole profile"
        out += [
            f"**{title}, {unit} (largest changes first)**",
            "",
            md_table(
                df.head(top).select(
                    pl.col(name).str.slice(0, 70),
                    "status",
                    (pl.col("base_ns") / 1e6).round(3).alias("base_ms"),
                    (pl.col("new_ns") / 1e6).round(3).alias("new_ms"),
                    (pl.col("delta_ns") / 1e6).round(3).alias("delta_ms"),
                    pl.col("delta_pct").round(1),
                    "significant",
                )
            ),
            "",
        ]
    if res.rule:
        out.append(f"<sub>{res.rule}</sub>")
    return _lines(out)


__all__ = ["snippet", "diff_snippet", "NsysqlError"]
