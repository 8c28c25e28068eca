"""PR-ready Markdown snippets: a few facts, top-10 kernels, the iteration line, idle by cause, findings.

Whatever comes from the export (file, kernel, range, op and GPU names, and the sentences that quote them) is
written as a code span (render.code), so no export can put live Markdown or HTML (an image, a link, a tag) into a
PR; only nsysql's own labels are Markdown.
"""

from __future__ import annotations

import re

import polars as pl

from ..render import code, distinct, one_line
from ..render import markdown as md_table

NAME_MAX = 200  # a name in a line of prose (a file's, an op's)
LABEL_MAX = 80  # a kernel's, a range's name in a table (cut with `…`, unique: render.distinct)
VALUE_MAX = 1000  # a fact or a finding's evidence: every line stays within _lines' limit, so no span is cut


def _ms(ns) -> str:
    return f"{ns / 1e6:,.2f}"


def snippet(prof, top: int = 10, chart: str | None = None, range: str | None = None) -> str:
    """The PR snippet: the finding to fix first, the findings, the facts, the top kernels (the chart's image
    linked where `chart`, a path relative to the snippet, names it), idle time by cause; `range`: the loop
    (None: detected)."""
    s = prof.snippet(top=top, range=range)
    facts = {key: (item, value) for key, item, value in s["facts"].select("key", "item", "value").iter_rows()}
    value = lambda key, default=None: facts.get(key, (None, default))[1]  # noqa: E731
    gpus = s["gpus"]
    out = [f"#### nsysql: {code(prof.path.name, NAME_MAX)}", ""]
    lead = None  # the summary's first line: the finding to fix first, else why none is (under **Findings**)
    if value("fix_first") and facts["fix_first"][0] == "fix first":
        out += [f"{bold('Fix first')}: {code(str(value('fix_first')), VALUE_MAX)}", ""]
    elif value("fix_first"):
        lead = code(str(value("fix_first")), VALUE_MAX)
    out += _findings(s["findings"], lead) + ["**Profile**", ""]
    if value("step"):  # the headline first
        out.append(f"- **steady-state step**: {code(str(value('step')), VALUE_MAX)}")
    line = f"- **nsys** {code(str(value('nsys_version', 'unknown')), NAME_MAX)} · **span** {value('span', '?')}"
    if gpus.height:
        busy = dict(s["notes"].iter_rows())["gpu_busy_all"]
        line += f" · **GPUs** {code(str(value('gpus')), VALUE_MAX)} · **GPU busy (whole profile)** {busy}"
    out.append(line)
    out.append(f"- **iterations**: {code(str(value('iterations', 'none')), VALUE_MAX)}")
    out += [f"- {bold(facts[k][0])}: {code(str(facts[k][1]), VALUE_MAX)}" for k in ("outliers", "idle") if value(k)]
    ops = ops_line(s.get("top_ops"))
    if ops:
        out.append(f"- **PyTorch ops by GPU time**: {ops}")
        if said := dict(s["notes"].iter_rows()).get("ops_note"):  # nsysql's own sentence: graphs traced whole
            out.append(f"  - _{said}_")
    out.append("")
    k = s["kernels"]
    if k.height:
        title = top_kernels(k.height)
        out += [f"**{title}**", ""]
        if chart:  # nsysql's own file name, beside the snippet: a link no export's text reaches
            out += [f"![{title} by total GPU time]({chart})", ""]
        out += [
            md_table(
                k.select(
                    pl.Series("kernel", distinct(k["name"].to_list(), LABEL_MAX)),
                    "count",
                    (pl.col("total_ns") / 1e6).round(3).alias("total_ms"),
                    (pl.col("avg_ns") / 1e3).round(1).alias("avg_us"),
                    pl.col("pct").round(1).alias("pct"),
                )
            ),
            "",
        ]
    graphs = dict(s["notes"].iter_rows()).get("kernels_note")
    if graphs:  # nsysql's own sentence (no export's text): CUDA graphs traced whole, left out of the table
        out += [f"_{graphs}_", ""]
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
    return _lines(out)


def top_kernels(n: int) -> str:
    """The title of a table or chart of the `n` kernels with most GPU time: `Top 10 kernels`, `Top kernel`."""
    return f"Top {n} kernels" if n != 1 else "Top kernel"


def _findings(f: pl.DataFrame, lead: str | None = None) -> list[str]:
    """The findings as a list, each with the time it would give back, before the facts they rest on; `lead`, the
    summary's line on how they rank (none worth fixing first, no loop to rank them by), above them."""
    rows = [
        f"- {bold(r['finding'])}{_headroom(r, overlapped(f, i))}: {code(str(r['evidence']), VALUE_MAX)}"
        for i, r in enumerate(f.iter_rows(named=True))
    ]
    return ["**Findings**", "", *([lead, ""] if lead else []), *(rows or ["- none"]), ""]


def overlapped(findings: pl.DataFrame, i: int) -> str:
    """What the headroom of finding `i` (a row of summary's ranked findings) shares, as said beside it: nothing
    for an additive one; for a symptom (not additive: it draws on the same pool as the findings that explain it,
    which rank above it), the findings above it that draw on its pool, by name, or, where none does, that no
    finding names its cause."""
    r = findings.row(i, named=True)
    if r.get("additive") is not False:
        return ""
    above = findings.head(i).filter(pl.col("pool") == r["pool"])["finding"].to_list()
    return f"overlaps {', '.join(above)}" if above else "a symptom: no finding names its cause"


def _headroom(r: dict, overlap: str = "") -> str:
    """A finding's headroom as the snippet shows it beside its name (nothing where it has none), with what it
    shares (`overlapped`)."""
    if r.get("headroom_ms") is None:
        return ""
    overlap = f", {overlap}" if overlap else ""
    return f" ({r['headroom_ms']:,.2f} ms per iteration, {r['headroom_pct']:.1f}% of the step{overlap})"


# nsysql's own labels and sentences, written as Markdown when they hold nothing Markdown or HTML acts on (no
# emphasis, link, tag, entity or autolinked URL can start from these characters); a label that names a file (a
# diff's per-file lines) or a sentence that quotes a range may hold anything, and is a code span
_PLAIN = re.compile(r"[A-Za-z0-9 .,:;%+=/()-]*")


def bold(text: str) -> str:
    """`text` in bold: as it is when plain (_PLAIN), else as a code span."""
    text = str(text)
    plain = _PLAIN.fullmatch(text) and "://" not in text and "www." not in text.lower()
    return f"**{text}**" if plain else f"**{code(text, VALUE_MAX)}**"


def ops_line(o: pl.DataFrame | None) -> str | None:
    """The top PyTorch operators by GPU time (forward + backward: the snippet's `top_ops`); None without operator
    ranges or when none launched a kernel."""
    if o is None:
        return None
    return (
        ", ".join(
            f"{code(r['op'], NAME_MAX)} {(r['fwd_gpu_ns'] + r['bwd_gpu_ns']) / 1e6:,.3f} ms (fwd "
            f"{r['fwd_gpu_ns'] / 1e6:,.3f} + "
            f"bwd {r['bwd_gpu_ns'] / 1e6:,.3f})"
            for r in o.iter_rows(named=True)
        )
        or None
    )


def _lines(out: list[str]) -> str:
    """The snippet's lines, each shown safely: names from the export (a file's, a range's in a finding) may hold
    control characters or run to megabytes."""
    return "\n".join(one_line(line, 4000) for part in out for line in part.split("\n")) + "\n"


def diff_snippet(base, new, top: int = 10, range: str | None = None) -> str:
    """The PR snippet of NEW against BASE (Profile.diff; `range`: the loop of both, None: each side's detected)."""
    res = base.diff(new, range=range)
    out = [
        f"#### nsysql diff: {code(base.path.name, NAME_MAX)} → {code(new.path.name, NAME_MAX)}",
        "",
        bold(res.headline),
        "",
    ]
    out += [f"- {bold(k)}: {code(str(val), VALUE_MAX)}" for k, val in res.notes.iter_rows()]  # items name files
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
                    pl.Series(name, distinct(df.head(top)[name].to_list(), LABEL_MAX)),
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
        out.append(f"<sub>{code(res.rule, VALUE_MAX)}</sub>")  # the rule names both files
    return _lines(out)


__all__ = ["snippet", "diff_snippet"]
