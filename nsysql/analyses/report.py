"""The report's data: everything `nsysql report` shows of one profile (the HTML page) and of its PR snippet
(Markdown), composed from the other analyses' answers (catalog's `report` and `snippet` declarations). The front
ends (nsysql.report) only draw it.

Each is a dict of frames, stored like any answer: a section that does not apply is absent, and `notes` (key,
text) says why in one line, beside the sentences the page prints under its charts.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from . import iterations as _iter
from . import summary as _summary

# The sections of `report` (those of `snippet`: summary's, `top_ops` and `notes`), each the answer of a declared
# analysis or made here from those; a front end reads them by these names
SECTIONS = {
    "facts": "summary's facts (key, item, value)",
    "gpus": "summary's GPUs",
    "findings": "summary's findings",
    "kernels": "summary's top kernels",
    "idle by cause": "summary's idle time by cause (where the profile has GPU idle gaps >= 1 ms)",
    "memory": "summary's memory operations",
    "cards": "the facts at the top of the page: label, value, detail (cards)",
    "iterations": "iterations(), where a loop is found (else notes' iterations_why)",
    "iteration_stats": "iteration_stats(), beside iterations",
    "timeline": "timeline() over the iterations, else the active span, of the devices drawn (drawn_devices)",
    "timeline_gaps": "gaps() on the timeline: of the devices drawn, cut to its window (timeline_gaps)",
    "metrics": "metrics_timeline() over the timeline's span, where the export sampled GPU metrics",
    "categories": "kernels(by='category'), where the profile has kernels (else notes' kernels_why)",
    "activity": "gap_activity(by='cause', top=5), beside idle by cause (else notes' activity_why)",
    "ranges": "ranges(), most total time first, where the profile has NVTX ranges (else notes' ranges_why)",
    "kernels_by_range": "kernels_by_range(), most total time first (else notes' kernels_by_range_why)",
    "ops": "ops(), where the profile has PyTorch operator ranges",
    "top_ops": "the snippet's top 3 of ops() by GPU time (top_ops)",
    "notes": "key, text: why a section is absent, and the sentences under the charts",
}
NOTES_SCHEMA = {"key": pl.Utf8, "text": pl.Utf8}
CARDS_SCHEMA = {"label": pl.Utf8, "value": pl.Utf8, "detail": pl.Utf8}
# what the report's page reads of summary's sections (Profile.summary)
SUMMARY_SECTIONS = ("facts", "gpus", "findings", "kernels", "idle by cause", "memory")

# GPUs drawn on the timeline at most: each costs two queries and a trace of ~1,500 points (an export whose kernels
# claimed hundreds of device ids made a report of tens of MB, slowly); the busiest are drawn and the note says
# what was left out
MAX_DEVICES_DRAWN = 16

NO_TIMELINE = "No GPU work traced in this profile, so there is no timeline to draw."
NO_SPAN = "The GPU ops drawn here span no time (the first starts where the last ends), so there is no timeline to draw."
NO_KERNELS = "No kernels in this profile."
NO_RANGES = "No NVTX ranges: the profile was captured without -t nvtx, or the program has no NVTX annotations."
NO_KERNELS_IN_RANGES = "No kernel was launched inside an NVTX range."


def categories_caption(tensor: str) -> str:
    """The caption under the kernel categories chart; `tensor`: what the devices' tensor counter is called
    (findings.tensor_metric: Turing's counts the fp16 pipe too)."""
    return (
        "Categories by kernel name (rules: queries/v1/canonical/44_kernel_rules.sql); tensor-core use by GPU metrics "
        f"where the export has them ({tensor} while the kernel ran alone), else by name."
    )


def notes(texts: dict[str, str | None]) -> pl.DataFrame:
    """The notes section: one row per sentence given (None: left out)."""
    rows = [(k, v) for k, v in texts.items() if v is not None]
    return pl.DataFrame(rows, schema=NOTES_SCHEMA, orient="row")


def summary_sections(summ: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    return {k: summ[k] for k in SUMMARY_SECTIONS if k in summ}


def cards(
    facts: dict, gpus: pl.DataFrame, stats: pl.DataFrame | None, its, gaps, untraced: tuple[str, str] | None = None
) -> pl.DataFrame:
    """The fact cards at the top of the page: the headline first (the median steady-state step on its clock,
    over the steady-state steps' time the GPU's busy and idle shares, the idle in gaps >= 1 ms apart), then nsys,
    span, GPUs and the whole profile's GPU busy share. `its` and `gaps`: the iterations and gaps the headline's
    idle in gaps >= 1 ms is counted from (None: not known); `untraced`: the GPUs card where there is no GPU op
    (its value and why), as summary says it (untraced_gpu_line); None: from the profile's facts alone."""
    one = lambda k, d=None: (facts.get(k) or [d])[0]  # noqa: E731
    rows = _step_cards(stats, its, gaps)
    rows += [
        ("nsys", one("nsys_version", "unknown"), None),
        ("span", f"{span / 1e9:,.3f} s" if (span := int(one("span_ns") or 0)) else "unknown", None),
    ]
    if gpus.height:
        names = sorted(set(n or "GPU" for n in gpus["device"].to_list()))
        rows.append(("GPUs", f"{gpus.height} × {names[0]}" if len(names) == 1 else ", ".join(names), None))
        busy = gpus["busy_ns"].sum() / max(gpus["active_ns"].sum(), 1) * 100
        if gpus["active_ns"].sum() < _summary.MIN_ACTIVE_NS:
            text = f"{gpus['busy_ns'].sum() / 1e3:.1f} us of GPU time: too little for a share"
            rows.append(("GPU busy", "—", text))
        else:
            rows.append(("GPU busy", f"{busy:.1f}%", "whole profile: of the GPUs' active span"))
    else:  # an export without GPU activity does not show that the GPU was unused: say what it holds
        rows.append(("GPUs", *(untraced or ("none traced", _summary.untraced_gpu(one("span_from") or "")))))
    return pl.DataFrame(rows, schema=CARDS_SCHEMA, orient="row")


def untraced_gpu_line(summ: dict[str, pl.DataFrame]) -> tuple[str, str] | None:
    """The GPUs card where the profile has no GPU op ("none traced" or "none usable", and why), as summary's
    GPUs fact says it (it counts the GPU ops the load dropped as flawed); None where that fact names GPUs."""
    said = summ["facts"].filter(pl.col("key") == "gpus")["value"].to_list()
    if summ["gpus"].height or not said or ": " not in said[0]:
        return None
    value, _, why = said[0].partition(": ")
    return value, why


def _step_cards(stats: pl.DataFrame | None, its, gaps) -> list[tuple]:
    if stats is None or not stats["steady"][0]:
        return []
    h = _summary.headline(stats, its, gaps)
    where = (
        f"median on the GPU; the CPU runs ahead, by up to {_iter.duration(h['cpu_lead_ns'] or 0)}"
        if h["step_clock"] == "gpu"
        else "median, steady state"
    )
    rows = [("step", _iter.duration(h["median_ns"]), where)]
    total, idle = h["steady_ns"], h.get("steady_idle_ns")
    if idle is not None and total:
        rows.append(("GPU busy / step", f"{100 * (total - idle) / total:.1f}%", "of the steady-state steps' time"))
        big = h.get("idle_gaps_1ms_ns")
        detail = f"{100 * big / total:.1f}% in gaps >= 1 ms" if big is not None else "of the steady-state steps' time"
        rows.append(("GPU idle / step", f"{100 * idle / total:.1f}%", detail))
    return rows


def iterations_line(stats: pl.DataFrame) -> str:
    """The sentence under the iterations chart."""
    s = stats.row(0, named=True)
    return (
        f"{s['iterations']} iterations of {s['range_said']} ({s['mode']}), {s['warmup']} warm-up (shaded); "
        + _iter.steady_sentence(s)
        + ". "
        + (f"Outliers: {s['outlier_pattern']}. " if s["outlier_pattern"] else "No outliers. ")
        + f"Detected: {s['detected']}."
    )


def drawn_devices(gpus: pl.DataFrame) -> tuple[list[int] | None, str | None]:
    """The devices the timeline draws (None: every one) and the sentence saying which were left out."""
    if gpus.height <= MAX_DEVICES_DRAWN:
        return None, None
    top = gpus.sort(["busy_ns", "device_id"], descending=[True, False], nulls_last=True).head(MAX_DEVICES_DRAWN)
    busy = gpus["busy_ns"].sum()
    share = f" ({top['busy_ns'].sum() / busy:.0%} of all GPU busy time)" if busy else ""
    note = (
        f"{gpus.height:,} GPUs ran work; the {MAX_DEVICES_DRAWN} busiest are drawn{share}, the other "
        f"{gpus.height - MAX_DEVICES_DRAWN:,} left out (nsysql summary lists every GPU)."
    )
    return sorted(top["device_id"].to_list()), note


def window(its: pl.DataFrame | None) -> tuple[int, int] | None:
    """The stretch the timeline shows: the iterations, where there are some of non-zero span; else None (the
    whole active span)."""
    if its is not None and its.height and its["end_ns"].max() > its["start_ns"].min():
        return int(its["start_ns"].min()), int(its["end_ns"].max())
    return None


def timeline_gaps(g: pl.DataFrame, drawn: list[int] | None, win: tuple[int, int] | None) -> pl.DataFrame:
    """The idle gaps drawn on the timeline: of the devices drawn, cut to the window."""
    if drawn is not None:
        g = g.filter(pl.col("device_id").is_in(drawn))
    if win:
        g = g.filter((pl.col("end_ns") > win[0]) & (pl.col("start_ns") < win[1])).with_columns(
            start_ns=pl.col("start_ns").clip(lower_bound=win[0]),
            end_ns=pl.col("end_ns").clip(upper_bound=win[1]),
        )
        g = g.with_columns(duration_ns=pl.col("end_ns") - pl.col("start_ns"))
    return g


def shown(its: pl.DataFrame, win: tuple[int, int], gpus: pl.DataFrame) -> str:
    """What stretch the timeline shows, beside the GPUs' active span (first to last GPU op): the iterations' window
    may be the longer of the two (a first iteration's CPU work before any GPU op), so it is not said to be a part
    of that span."""
    active, shown_s = gpus["active_ns"].max() / 1e9, (win[1] - win[0]) / 1e9
    if shown_s < active:
        return f"Shown: the {its.height} iterations ({shown_s:.3f} s of the GPU's {active:.3f} s active span)."
    return (
        f"Shown: the {its.height} iterations, {shown_s:.3f} s (the GPU's active span, first to last GPU op, is "
        f"{active:.3f} s)."
    )


def idle_why(gpus: pl.DataFrame, untraced: tuple[str, str] | None = None) -> str:
    """Why the report shows no idle time by cause: no gap of 1 ms or more, or, where the profile has no GPU op,
    why, as summary says it (`untraced`: untraced_gpu_line's GPUs card, "none usable" where the load left all
    the GPU activity recorded out as flawed, else "none traced")."""
    if gpus.height:
        return "Nothing to show: no gap of 1 ms or more."
    value, why = untraced or ("none traced", "")
    what = "no usable GPU work" if value == "none usable" else "no GPU work traced"
    return f"Nothing to show: {what}" + (f": {why}" if why else "") + "."


def top_ops(ops: pl.DataFrame, top: int = 3) -> pl.DataFrame:
    """The `top` PyTorch operators by GPU time (forward + backward) among those that launched a kernel."""
    return ops.filter(pl.col("fwd_gpu_ns") + pl.col("bwd_gpu_ns") > 0).head(top)


@dataclass(frozen=True)
class DiffReport:
    """What the comparison page shows: the diff (nsysql.analyses.diff.Diff), each side's steady-state step
    times (None without iterations), and NEW's own report data (`report`)."""

    diff: object
    base_steady: pl.Series | None
    new_steady: pl.Series | None
    new: dict[str, pl.DataFrame]


def steady(its: pl.DataFrame) -> pl.Series:
    return its.filter(~pl.col("warmup"))["wall_ns"]


def timeline(ask, gpus: pl.DataFrame, its: pl.DataFrame | None, gaps: pl.DataFrame | None) -> tuple[dict, dict]:
    """The GPU timeline's frames (`timeline`, `timeline_gaps` where the gaps are known, `metrics` where the
    export sampled GPU metrics) and notes: over the iterations, else the whole active span, of the busiest
    devices. `ask(name, **params)`: the answer of a declared analysis."""
    if not gpus.height:
        return {}, {"timeline_why": NO_TIMELINE}
    win = window(its)
    drawn, left_out = drawn_devices(gpus)
    tl = ask("timeline", start_ns=win[0], end_ns=win[1], devices=drawn) if win else ask("timeline", devices=drawn)
    if not tl.height:  # each drawn device's ops (or the window) span no time: no bin to cut
        return {}, {"timeline_why": NO_SPAN}
    out = {"timeline": tl}
    if gaps is not None:
        out["timeline_gaps"] = timeline_gaps(gaps, drawn, win)
    t0, t1 = int(tl["start_ns"].min()), int(tl["end_ns"].max())
    m = ask("metrics_timeline", start_ns=t0, end_ns=t1) if t1 > t0 else None
    if m is not None and drawn is not None:
        m = m.filter(pl.col("device_id").is_in(drawn))
    if m is not None and m.height:  # only where the export sampled GPU metrics
        out["metrics"] = m
    said = {
        "timeline_origin": "the first iteration" if win else "the first GPU op",
        "timeline_shown": shown(its, win, gpus) if win else None,
        "timeline_left_out": left_out,
    }
    return out, said
