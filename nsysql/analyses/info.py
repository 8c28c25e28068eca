"""What an export holds and which commands apply to it."""

from __future__ import annotations

import polars as pl

from . import advice as _advice
from . import metrics as _metrics
from ._sql import facts, run


def _fmt_ns(ns) -> str:
    return f"{int(ns) / 1e9:.3f} s" if ns is not None else "unknown"


def info(con, loop=None, path: str | None = None) -> pl.DataFrame:
    """Rows of (section, item, value): the file, its contents, what it lacks, and what can be asked of it (each
    command about one export, `commands`; `loop`: as there). `path`: the export as the user named it (None: the
    file it was loaded from, which a link resolves to)."""
    f = facts(con)
    one = lambda k, d=None: (f.get(k) or [d])[0]  # noqa: E731
    rows: list[tuple[str, str, str]] = [
        ("file", "path", path or one("source_path")),
        ("file", "bytes", one("source_bytes")),
        (
            "file",
            "nsys version",
            f"{one('nsys_version', 'unknown')} (from {one('version_source', 'nothing in the file')})",
        ),
    ]
    if one("capture_version") and one("capture_version") != one("nsys_version"):
        rows.append(("file", "captured with", one("capture_version")))
    if one("schema_version"):
        rows.append(("file", "export schema", one("schema_version")))
    rows.append(("file", "span", _fmt_ns(one("span_ns")) + (f" (from {one('span_from')})" if one("span_from") else "")))
    if one("rank"):
        rows.append(("file", "rank", one("rank")))
    for d in run(con, "devices").iter_rows():
        desc = d[1] or "unnamed GPU"
        if d[2]:
            desc += f", {d[2]} SMs"
        if d[3]:
            desc += f", {d[3] / 2**30:.0f} GiB"
        if d[4]:
            desc += f", sm_{d[4].replace('.', '')}"
        rows.append(("gpus", f"device {d[0]}", desc))
    counts = dict(run(con, "table_counts").iter_rows())
    for what, n in counts.items():
        rows.append(("contents", what, str(n)))
    for msg in f.get("missing", []):
        rows.append(("lacks", msg.split(":")[0], msg.split(":", 1)[1].strip() if ":" in msg else msg))
    rows += quality(con)
    for command, analysis, why in commands(con, loop):
        ok = not why
        if analysis == "collectives" and ok and (unsized := _by_kernel_name(con)):
            why = unsized  # it answers per kind, from the NCCL kernels' names
        if analysis == "cpu" and (partly := _cpu_scheduled(con, why, f)):
            ok, why = True, partly
        rows.append(("commands", command, ("yes" if ok else "no") + (f": {why}" if why else "")))
    # what this export cannot answer, and the capture switch that would (advice.CAPTURE_RULES)
    for r in _advice.unanswered(_advice.holdings(con, f, counts)):
        rows.append(("cannot answer", r.question, f"profile with {_advice.switch(r.key)}: {r.evidence}"))
    return pl.DataFrame(rows, schema=["section", "item", "value"], orient="row")


def quality(con) -> list[tuple[str, str, str]]:
    """The export's flawed rows, what each problem is and what nsysql did with them: the data_quality table
    (rows the load dropped or kept) and the checks the load leaves to this question (row_checks.sql)."""
    found = pl.concat([run(con, "data_quality"), run(con, "row_checks")], how="vertical_relaxed")
    rows = [
        ("data quality", f"{source}: {problem}", f"{n:,} row{'s' if n != 1 else ''}; {effect} (in {canonical})")
        for source, canonical, problem, n, effect in found.iter_rows()
        if n
    ]
    none = "none found: no row without a start or end, ending before it starts, missing a link or a name, or repeated"
    return rows or [("data quality", "flawed rows", none)]


# What a canonical table holds, for the line saying an analysis that requires it does not apply; and the
# capture rule (advice.CAPTURE_RULES) whose switch would have recorded it, where one would.
HOLDS = {
    "gpu_ops": ("GPU work (kernels, copies, memsets)", None),
    "gpu_busy": ("GPU work (kernels, copies, memsets)", None),
    "nvtx_ranges": ("NVTX ranges", None),
    "api_calls": ("CUDA API calls", None),
    "gpu_metric_samples": ("GPU metrics", "gpu_metrics"),
    "gpu_memory_events": ("CUDA memory usage events", "memory_usage"),
    "cpu_samples": ("CPU samples", "cpu_samples"),
}


# A required table whose rows another, smaller one tells: gpu_metric_counts has a row exactly where
# gpu_metric_samples has samples, counted as the export is read (7.7M samples are not read to learn that).
PROBES = {"gpu_metric_samples": "gpu_metric_counts"}


def commands(con, loop=None) -> list[tuple[str, str, str]]:
    """Each command that answers about one export (the analyses that declare one, Analysis.command; `info`
    itself left out), in order of its name: (command, its analysis, why it does not apply: '' where it does).
    Internal analyses (the pieces of others, a command's view) have no command and are not listed. `loop()`:
    why no loop is found ('' where one is), for `iterations` where its refusal passes (see _why_not)."""
    from ..engine import REGISTRY

    shown = sorted((a.command, a) for a in REGISTRY.values() if a.command and a.name != "info")
    rows = _rows(con, [r for _, a in shown for r in a.requires])
    return [(command, a.name, _why_not(con, a, rows, loop)) for command, a in shown]


def _why_not(con, a, rows: dict[str, int], loop=None) -> str:
    """What the analysis `a`'s command says where it has nothing to answer: its own refusal (Analysis.refusal,
    which it raises before anything else), else the canonical tables it requires that hold no rows; for
    `iterations`, where NVTX push/pop ranges pass both, whether a loop is found among them (`loop()`: the
    detector's own refusal, as `nsysql iterations` prints it); ''."""
    why = (a.refusal(con) if a.refusal else None) or _why(con, a.requires, rows)
    return why or (loop() if loop is not None and a.name == "iterations" else "")


def why_not(con, analysis: str, loop=None) -> str:
    """Why the analysis `analysis` does not apply to this export (as `info` says it of its command), or '' where
    it does (`loop`: as commands has it)."""
    from ..engine import REGISTRY

    a = REGISTRY[analysis]
    why = _why_not(con, a, _rows(con, a.requires), loop)
    if analysis == "cpu" and _cpu_scheduled(con, why, facts(con)):
        return ""  # it answers per thread and process, as `info` says; its other `by`s refuse in their own line
    return why


def _cpu_scheduled(con, why: str, f: dict) -> str | None:
    """Where `cpu` lacks CPU samples (`why`: its refusal) but the export has scheduling events (profile facts
    `f`: span_from), which alone answer per thread and per process (nsysql.analyses.cpu): how far it applies
    (plain `cpu` answers per thread, as `--by thread` does, and `--by process`; per function is refused); else
    None."""
    from .cpu import no_samples

    if why and "scheduling events" in ((f.get("span_from") or [""])[0] or ""):
        return (
            f"per thread and process only, from scheduling events ({no_samples(con)}): plain `cpu` answers per "
            "thread, `--by process` per process"
        )
    return None


def _rows(con, requires) -> dict[str, int]:
    """The rows of each table the requirements name, of api_calls (what says why no GPU work is there) and of
    gpu_ops (what says why no CUDA call is there)."""
    tables = sorted({t for r in requires for t in r.split("|")} | {"api_calls", "gpu_ops"})
    return {t: run(con, "table_rows", table=PROBES.get(t, t)).item() for t in tables}


def _why(con, requires, rows: dict[str, int]) -> str:
    """The requirements that no table holds rows for, each said once; '' where every one is met."""
    empty = [r for r in requires if not any(rows[t] for t in r.split("|"))]
    return "; ".join(dict.fromkeys(_empty(con, r.split("|"), rows) for r in empty))


# the canonical table whose rows data_quality counts for a table made from it
DROPPED_FROM = {"gpu_busy": "gpu_ops"}


def _empty(con, tables: list[str], rows: dict[str, int]) -> str:
    """Why an analysis does not apply: none of `tables` (one requirement, met by any of them) holds rows."""
    if len(tables) == 1:
        what, rule = HOLDS.get(tables[0], (None, None))
        # the table's rows are in the export, all left out (flawed, or no row of its own): no capture switch is missing
        dropped = run(con, "dropped_rows", canonical=DROPPED_FROM.get(tables[0], tables[0])).item()
        if dropped and what:
            return (
                f"no {what}: {tables[0]} is empty; the export's {dropped:,} rows for it were all left out "
                "(`nsysql info` says why, under data quality)"
            )
        hint = f"; profile with {_advice.switch(rule)}" if rule else ""
        if tables[0] == "gpu_metric_samples" and (cannot := _metrics.unsampled(con)):
            hint = f"; {cannot}"  # no switch records them on these GPUs
        if tables[0] in ("gpu_ops", "gpu_busy"):
            hint = f"; {_advice.untraced_gpu(bool(rows['api_calls']))}"
        elif tables[0] == "nvtx_ranges":
            hint = f"; {_advice.NVTX_HINT}"
        elif tables[0] == "api_calls" and rows.get("gpu_ops"):  # GPU work ran, so CUDA calls launched it
            hint = "; the export holds GPU work but not the CUDA API calls that launched it"
        elif tables[0] == "api_calls":
            hint = "; captured without -t cuda, or the program made no CUDA call"
        return f"no {what}: {tables[0]} is empty{hint}" if what else f"{tables[0]} is empty"
    whats = [HOLDS.get(t, (t, None))[0] for t in tables]
    return f"no {', '.join(whats[:-1])} or {whats[-1]}: {', '.join(tables[:-1])} and {tables[-1]} are empty"


def _by_kernel_name(con) -> str | None:
    """Where NCCL kernels ran but no NCCL range carries a message size: what `collectives` then gives (per kind,
    from the kernels' names: collectives.by_kernel_name) and why it gives no size or bandwidth; else None."""
    from .collectives import unsized

    why = unsized(con)
    return None if why is None else f"per collective kind from the NCCL kernels' names only; sizes and bandwidth: {why}"
