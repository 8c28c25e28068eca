"""Where CPU time went, from CPU samples and thread scheduling, and what the threads did while the GPU waited.

The rules:
- A CPU sample (cpu_samples) counts in a window when its instant lies in [start, end). `--during gaps` is every
  GPU idle gap of `gaps()` (1 ms or longer); `iterations A:B` the windows of iterations A to B (both included);
  `range P` every instance of the NVTX ranges P selects. Overlapping windows count a sample once.
- On-CPU time (`on_cpu_ns`) is measured, not estimated from samples: the thread's `running` intervals of
  thread_states (scheduling events) inside the windows. Without scheduling events it is empty (null).
- A frame is named by its function without template arguments, parameters or return type
  (`c10::function_ref::callback_fn`). A template instance that wraps a function, as PyTorch's TensorIterator loops
  wrap the kernel they run, is named by the first function its template arguments name with its argument list
  (`at::native::aminmax_kernel`); the whole demangled name stays in `frame`.
- Roles are thread_roles' (queries/v1/canonical/67_thread_roles.sql). nsys's and CUPTI's own threads (role
  `profiler`) are left out of the gap story.
- What the threads did during gaps (`gap_rows`, `story`): the waiting (main) thread's time blocked in OS calls
  (by call) and on a CPU (with its top frames), and every other thread's on-CPU time with its top frame; a role
  is told when its threads were on a CPU for at least ACTIVITY_MIN_SHARE of the idle time. The data loader is
  named as what the GPU waited for when, in those gaps, the waiting thread was off the CPU (blocked or
  descheduled) for at least LOADER_SHARE of the idle time and the data-loader workers were on a CPU for at least
  LOADER_SHARE of it: the loop waited for a batch while the workers made it. The waiting thread is the main
  thread of the process that owns the gap's GPU; other processes' main threads are other threads. Without
  scheduling events, the CPU samples taken in the gaps tell who ran (a role is told from ACTIVITY_MIN_SHARE of
  them: shares of samples, not of time), the waiting thread's blocked OS calls still tell its wait, and the data
  loader is never named (no time on a CPU is measured).
- Python frames (`nsys profile --python-sampling=true`, exported with `--include-blobs=true`: python_samples):
  a Python sample is placed at its innermost frame outside Python's standard library (files under
  `.../lib/pythonX.Y/` but not `site-packages` or `dist-packages`, and `<frozen ...>` modules), named with the
  two frames that called it: where the program was, rather than the `select` it waits in. The story gives the
  main thread's most common place and its share of the main thread's Python samples in the gaps.
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import NsysqlError
from ._names import cut
from ._sql import run

BYS = ("function", "module", "thread", "process", "python")
LOADER_SHARE = 0.50
# a role's time on a CPU, or the main thread's wait, is told from this share of the idle time (the share from
# which gaps.ACTIVITY_MIN_SHARE names work elsewhere)
ACTIVITY_MIN_SHARE = 0.20
_INT64 = (-(2**62), 2**62)  # the whole profile as one window (is_interval's bounds)
_ROLE_WORDS = {
    "data_loader": ("data-loader worker", "data-loader workers"),
    "autograd": ("autograd thread", "autograd threads"),
    "nccl": ("NCCL thread", "NCCL threads"),
    "cuda_event_handler": ("CUDA event handler", "CUDA event handlers"),
    "launcher": ("launching thread", "launching threads"),
    "child_process": ("child process thread", "child process threads"),
    "main": ("main thread of another process", "main threads of other processes"),
    "other": ("other thread", "other threads"),
}


def parse_during(text: str | None) -> tuple[str | None, str | None]:
    """`gaps`, `iterations A:B` or `range P` (a space, `=` or `:` after the word) -> (kind, argument). Nothing
    (`--during ''`), or `range ''` (`""`: a pattern of nothing quoted as on a command line) -> ("range", ""): the
    NVTX ranges without a name, as `--range ''` selects them everywhere (patterns.resolve_range)."""
    if text is None:
        return None, None
    if not str(text).strip():
        return "range", ""
    m = re.fullmatch(r"\s*(gaps|iterations|range)(?:[\s=:]+(.*))?", str(text)[:1000], re.S)
    if not m or (m.group(1) != "gaps" and not (m.group(2) or "").strip()):
        raise NsysqlError(f"`during` is gaps, iterations A:B or range PATTERN, not {str(text)[:60]!r}", option="during")
    arg = (m.group(2) or "").strip()
    if m.group(1) == "range" and arg in ("''", '""'):
        return "range", ""
    return m.group(1), arg or None


def merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The windows sorted and merged where they overlap or touch, so that no instant counts twice."""
    out: list[list[int]] = []
    for s, e in sorted(windows):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


_CALL = "\x01"  # `operator()` while a name is cut at its first `(` (the parameters), put back after


def short_name(frame: str | None) -> str:
    """A frame's function as the rules above name it."""
    if not frame:
        return "?"
    s = frame.replace("(anonymous namespace)::", "").replace("operator()", "operator" + _CALL)
    inner = _wrapped(s)
    if inner:
        return inner.replace(_CALL, "()")
    while True:  # template arguments, innermost first
        t = re.sub(r"<[^<>]*>", "", s)
        if t == s:
            break
        s = t
    s = s.split("(", 1)[0].strip()  # the parameters
    return (s.rsplit(" ", 1)[-1] or frame).replace(_CALL, "()")  # the return type


def _function() -> pl.Expr:
    """The `function` column of samples: short_name of the leaf frame, `?` as for an empty name where the sample
    has no frame or its name id is missing from StringIds (a null the tables would show blank and sentences would
    count as unresolved addresses)."""
    return pl.col("leaf_frame").fill_null("").map_elements(short_name, return_dtype=pl.String)


_NAME_CALL = re.compile(r"[<>]|(?<![\w:])([A-Za-z_]\w*(?:::[A-Za-z_~]\w*)+\x01?)\(")


def _wrapped(s: str) -> str | None:
    """The function a template instance wraps: the first qualified name followed by `(` inside one of its
    template argument lists (see the rules above), not one after them (`A<float>::param_type::a()` wraps
    nothing), or None."""
    lt = s.find("<")
    if lt < 0 or s.find("(") < lt:
        return None
    depth = 0
    for m in _NAME_CALL.finditer(s, lt):
        if m.group(0) in "<>":
            depth = depth + 1 if m.group(0) == "<" else max(depth - 1, 0)
        elif depth:
            return m.group(1)
    return None


def windows(con, kind: str | None, arg: str | None, gaps_df=None, spans=None, its=None) -> list[tuple[int, int]]:
    """The windows of a `during` (parse_during): `gaps_df` for gaps; for iterations `spans` (iteration spans)
    and `its`, the iterations (A, B) that `arg` names."""
    if kind is None:
        return [_INT64]
    if kind == "gaps":
        if gaps_df is None or not gaps_df.height:
            raise NsysqlError("no GPU idle gaps of 1 ms or more in this profile: nothing to read during them")
        return list(zip(gaps_df["start_ns"].to_list(), gaps_df["end_ns"].to_list()))
    if kind == "iterations":
        if spans is None:
            raise NsysqlError(
                "no repeating loop found, so no iterations to read during (name the loop with `range`, or give "
                "`during` as range PATTERN)",
                option=("range", "during"),
            )
        a, b = its
        sel = spans.filter(pl.col("iteration").is_between(a, b))
        if not sel.height:
            raise NsysqlError(
                f"`during` iterations {arg}: no such iterations (the profile has 0 to {spans['iteration'].max()})",
                option="during",
            )
        return list(zip(sel["start_ns"].to_list(), sel["end_ns"].to_list()))
    from .patterns import resolve_range

    names = resolve_range(con, arg)[0]
    w = run(con, "cpu_range_windows", names=names)
    return list(zip(w["start_ns"].to_list(), w["end_ns"].to_list()))


def none_during(during: str, wins: list[tuple[int, int]], sampled: bool = True) -> str:
    """The line for windows in which the export, though it has CPU samples (`sampled`; else scheduling events),
    has none."""
    w = merged(wins)
    ms = sum(e - s for s, e in w) / 1e6
    what = "CPU sample was taken" if sampled else "thread was on a CPU (scheduling events)"
    return (
        f"no {what} during {during} ({len(w):,} window{'s' if len(w) != 1 else ''}, {ms:,.2f} ms in "
        f"all), though the profile has {'samples' if sampled else 'scheduling events'} elsewhere: nothing to count there"
    )


def _windows_frame(wins: list[tuple[int, int]]) -> dict:
    return {"ids": list(range(len(wins))), "starts": [s for s, _ in wins], "ends": [e for _, e in wins]}


def no_samples(con) -> str | None:
    """The one line saying why there is nothing to answer from, with the capture switch that records it; None
    when the export has CPU samples."""
    from .advice import switch

    if con.execute("SELECT EXISTS (SELECT 1 FROM cpu_samples)").fetchall()[0][0]:
        return None
    return f"no CPU samples in this profile: record them with {switch('cpu_samples')}"


def default_by(con) -> str:
    """The `by` of `cpu` asked without one: per function, where the export has CPU samples to read functions
    from or nothing else to answer from; per thread where it has scheduling events alone, which measure each
    thread's time on a CPU but not which functions ran (the answer a capture without samples allows)."""
    return "thread" if no_samples(con) and _scheduled(con) else "function"


def default_refusal(con) -> str | None:
    """What `cpu`, asked with its defaults (default_by), says where it has nothing to answer from, or None."""
    by = default_by(con)
    return refusal(con, by) if no_samples(con) and by == "function" else None


def refusal(con, by: str) -> str:
    """The one line for a `by` the export cannot answer without CPU samples (no_samples): where it has scheduling
    events, that functions, modules and stacks need samples and that time on a CPU per thread or process is
    measured from scheduling."""
    why = no_samples(con) or ""
    if by in ("thread", "process") or not _scheduled(con):
        return why
    return (
        f"{why} (functions, modules and stacks are read from them); time on a CPU per thread or process is "
        "measured from the scheduling events it has: `--by thread` or `--by process`"
    )


def sched_note(con, by: str | None = "thread") -> str:
    """The line under a per-thread or per-process answer measured from scheduling events alone (no CPU samples:
    samples, pct and top_function empty), naming the capture switch that records samples; '' otherwise.
    `by` None: the answer of `cpu` asked without a `by` (default_by), which the line says is per thread for want
    of samples, not per function as where they exist."""
    from .advice import switch

    if no_samples(con) is None or not _scheduled(con):
        return ""
    why = "no CPU samples in this profile" + (", so per thread, not per function" if by is None else "")
    return (
        f"{why}: the on-CPU time is measured from scheduling events alone; samples, pct and top_function (which "
        f"functions ran) need CPU sampling: record them with {switch('cpu_samples')}"
    )


def cpu(con, wins: list[tuple[int, int]], by: str = "function") -> pl.DataFrame:
    """Where CPU time went in the windows `wins`, from the samples: one row per function (with its module), module,
    thread or process, most samples first; pct is of the samples in the windows. by="python": one row per place
    in the Python samples (python_place) and thread."""
    if by not in BYS:
        raise NsysqlError(f"`by` must be one of {', '.join(BYS)}, not {by!r}", option="by")
    wf = _windows_frame(merged(wins))
    if by == "python":
        return _python(con, wf)
    why = no_samples(con)
    if why and by in ("thread", "process") and _scheduled(con):
        return _by_threads_scheduled(con, wf, by)
    if why:
        raise NsysqlError(refusal(con, by))
    s = run(con, "cpu_window_samples", **wf).with_columns(function=_function())
    total = s["samples"].sum() or 0
    pct = (100.0 * pl.col("samples") / total) if total else pl.lit(0.0)
    if by == "function":
        out = s.group_by("function", pl.col("leaf_module").alias("module")).agg(
            pl.col("samples").sum(),
            pl.struct("pid", "tid").n_unique().alias("threads"),
            pl.col("leaf_frame").sort_by("samples", descending=True).first().alias("frame"),
        )
        return (
            out.with_columns(pct=pct)
            .sort(["samples", "function"], descending=[True, False])
            .select("function", "module", "samples", "pct", "threads", "frame")
        )
    if by == "module":
        out = s.group_by(pl.col("leaf_module").alias("module")).agg(
            pl.col("samples").sum(), pl.col("function").n_unique().alias("functions")
        )
        return out.with_columns(pct=pct).sort(["samples", "module"], descending=[True, False])
    return _by_threads(con, s, wf, by, pct)


def _python(con, wf: dict) -> pl.DataFrame:
    """cpu(by="python"): the Python samples per place (python_place) and thread, most first."""
    if not con.execute("SELECT EXISTS (SELECT 1 FROM python_samples)").fetchall()[0][0]:
        raise NsysqlError(no_python(con))
    py = run(con, "cpu_window_python", **wf)
    places = [python_place(f) for f in py["frames"].to_list()]
    df = py.select("pid", "tid").with_columns(
        place=pl.Series([p for p, _ in places], dtype=pl.String),
        file=pl.Series([f for _, f in places], dtype=pl.String),
    )
    total = df.height
    out = df.group_by("place", "file", "pid", "tid").agg(pl.len().cast(pl.Int64).alias("samples"))
    out = out.with_columns(pct=(100.0 * pl.col("samples") / total) if total else pl.lit(0.0))
    threads = run(con, "cpu_threads").select("pid", "tid", "thread", "role")
    return (
        out.join(threads, on=["pid", "tid"], how="left")
        .sort(["samples", "place", "pid", "tid"], descending=[True, False, False, False])
        .select("place", "file", "pid", "tid", "thread", "role", "samples", "pct")
    )


def no_python(con) -> str:
    """The one line for an export without Python samples: the capture that records them only where the export
    shows a Python program (cpu_python_evidence: nsys's Python sampler, a Python interpreter or DataLoader worker
    among the traced processes, a Python library sampled), naming that evidence; else that nothing shows one."""
    marks, decoded, damaged = run(con, "payloads_undecoded", domain="Python Periodic Sampling", event="mark").row(0)
    if marks and not decoded:  # the bytes were exported, and none decodes: exporting again would not help
        from .collectives import undecoded

        return f"no Python samples in this export: {undecoded(marks, damaged, 'nsys sampled Python, its marks carry')}"
    ev = run(con, "cpu_python_evidence")
    if not ev.height:
        return (
            "no Python samples in this profile, and nothing in it shows a Python program (no traced process, "
            "thread or sampled module is a Python interpreter): Python sampling would not apply"
        )
    kind, name, pid = ev.row(0)
    if name == "NSys PySampling":
        return (
            f"no Python samples in this export, though nsys sampled Python (its thread `{name}` in process {pid}): "
            "export the report again with `nsys export --type sqlite --include-blobs=true`, which keeps their frames"
        )
    where = f"{kind} `{name}`" + (f", pid {pid}" if pid is not None else " in the CPU samples")
    return (
        f"no Python samples in this profile of a Python program ({where}): record them with "
        "`nsys profile --python-sampling=true` and export with `nsys export --type sqlite --include-blobs=true`"
    )


def _by_threads(con, s: pl.DataFrame, wf: dict, by: str, pct: pl.Expr) -> pl.DataFrame:
    """cpu() per thread or process: samples, on-CPU time from scheduling, the top function, the role. Every thread
    that was sampled or on a CPU in the windows is one (samples 0 where none fell on it, top_function null), so
    that a process's `threads` counts the threads its samples and its `on_cpu_ns` are of."""
    keys = ["pid", "tid"] if by == "thread" else ["pid"]
    threads = run(con, "cpu_threads")
    on = (
        run(con, "cpu_window_states", **wf)
        .filter((pl.col("state") == "running") & (pl.col("overlap_ns") > 0))
        .group_by("pid", "tid")
        .agg(pl.col("overlap_ns").sum().alias("on_cpu_ns"))
    )
    per = (
        s.group_by("pid", "tid")
        .agg(pl.col("samples").sum())
        .join(on, on=["pid", "tid"], how="full", coalesce=True)
        .with_columns(pl.col("samples").fill_null(0).cast(pl.Int64))
    )
    top = (
        s.group_by(*keys, "function")
        .agg(pl.col("samples").sum())
        .sort(["samples", "function"], descending=[True, False])
        .group_by(keys, maintain_order=True)
        .first()
        .select(*keys, pl.col("function").alias("top_function"))
    )
    if by == "thread":
        out = per.join(threads.select("pid", "process", "tid", "thread", "role"), on=keys, how="left")
    else:  # the process's role: its own thread's (tid = pid), else that of its thread with most samples
        own = threads.filter(pl.col("pid") == pl.col("tid")).select("pid", "role")
        most = (
            per.join(threads.select("pid", "tid", "role"), on=["pid", "tid"], how="left")
            .sort(["samples", "on_cpu_ns", "tid"], descending=[True, True, False], nulls_last=True)
            .group_by("pid", maintain_order=True)
            .first()
            .select("pid", pl.col("role").alias("_most"))
        )
        names = threads.group_by("pid").agg(pl.col("process").drop_nulls().first())
        measured = pl.col("on_cpu_ns").is_not_null().any()  # null, not 0, where no scheduling event measured it
        out = per.group_by("pid").agg(
            pl.col("samples").sum(),
            pl.len().cast(pl.Int64).alias("threads"),
            pl.when(measured).then(pl.col("on_cpu_ns").sum()).alias("on_cpu_ns"),
        )
        out = out.join(own, on="pid", how="left").join(most, on="pid", how="left").join(names, on="pid", how="left")
        out = out.with_columns(pl.coalesce("role", "_most").alias("role")).drop("_most")
    out = out.join(top, on=keys, how="left").with_columns(pct=pct)
    cols = ["pid", "process"] + (["tid", "thread"] if by == "thread" else ["threads"])
    cols += ["role", "samples", "pct", "on_cpu_ns", "top_function"]
    order = ["samples", "on_cpu_ns", *keys]
    return out.sort(order, descending=[True, True] + [False] * len(keys), nulls_last=True).select(cols)


def _by_threads_scheduled(con, wf: dict, by: str) -> pl.DataFrame:
    """cpu() per thread or process without CPU samples: each thread's (process's) time on a CPU in the windows,
    measured from its scheduling events (thread_states `running`), most first; the columns of _by_threads, with
    samples, pct and top_function empty (nothing tells which functions ran). A process's role is its own
    thread's (tid = pid), else that of its thread longest on a CPU."""
    keys = ["pid", "tid"] if by == "thread" else ["pid"]
    threads = run(con, "cpu_threads")
    per = (
        run(con, "cpu_window_states", **wf)
        .filter((pl.col("state") == "running") & (pl.col("source") == "sched"))
        .group_by("pid", "tid")
        .agg(pl.col("overlap_ns").sum().alias("on_cpu_ns"))
        .join(threads.select("pid", "tid", "process", "thread", "role"), on=["pid", "tid"], how="left")
    )
    if by == "process":
        own = per.filter(pl.col("pid") == pl.col("tid")).select("pid", pl.col("role").alias("_own"))
        longest = per.sort(["on_cpu_ns", "tid"], descending=[True, False]).group_by("pid", maintain_order=True)
        per = (
            per.group_by("pid")
            .agg(
                pl.col("on_cpu_ns").sum(),
                pl.len().cast(pl.Int64).alias("threads"),
                pl.col("process").drop_nulls().first(),
            )
            .join(own, on="pid", how="left")
            .join(longest.first().select("pid", pl.col("role").alias("_most")), on="pid", how="left")
            .with_columns(pl.coalesce("_own", "_most").alias("role"))
        )
    none = {"samples": pl.lit(None, pl.Int64), "pct": pl.lit(None, pl.Float64), "top_function": pl.lit(None, pl.String)}
    cols = ["pid", "process"] + (["tid", "thread"] if by == "thread" else ["threads"])
    cols += ["role", "samples", "pct", "on_cpu_ns", "top_function"]
    out = per.with_columns(**none).sort(["on_cpu_ns", *keys], descending=[True] + [False] * len(keys))
    return out.select(cols)


def folded(con, wins: list[tuple[int, int]]) -> pl.DataFrame:
    """The samples in the windows as flame-graph folded stacks: `stack` (frames outermost first, `;` between
    them, each named as short_name names it) and `samples`, most first. A sample without frames is `?`."""
    why = no_samples(con)
    if why:
        raise NsysqlError(why)
    s = run(con, "cpu_window_samples", **_windows_frame(merged(wins)))
    per = s.group_by("stack_id").agg(pl.col("samples").sum())
    ids = [i for i in per["stack_id"].to_list() if i is not None]
    stacks = run(con, "cpu_stacks", stack_ids=ids)
    names = {
        sid: ";".join(short_name(f).replace(";", ":") for f in frames)
        for sid, frames in zip(stacks["stack_id"].to_list(), stacks["frames"].to_list())
    }
    out = per.with_columns(
        stack=pl.col("stack_id").map_elements(lambda i: names.get(i, "?"), return_dtype=pl.String).fill_null("?")
    )
    return out.group_by("stack").agg(pl.col("samples").sum()).sort(["samples", "stack"], descending=[True, False])


_STDLIB = re.compile(r"(/lib/python\d+(\.\d+)?/(?!.*(site|dist)-packages/))|^<frozen ")


def python_place(frames: list[dict]) -> tuple[str, str]:
    """Where a Python sample was (the rules above): `inner ← caller ← caller`, and the file of the first."""
    if not frames:
        return "?", ""
    i = next((k for k, f in enumerate(frames) if not _STDLIB.search(f["file"] or "")), 0)
    names = " ← ".join(f"{f['function'] or '?'}" for f in frames[i : i + 3])  # `?`: a name StringIds lacks
    return names, frames[i]["file"] or ""


def _python_clause(con, wf: dict, pid: int, tid: int) -> str:
    """The main thread's most common Python place in the windows, or nothing without Python samples."""
    py = run(con, "cpu_window_python", **wf).filter((pl.col("pid") == pid) & (pl.col("tid") == tid))
    if not py.height:
        return ""
    places = [python_place(f) for f in py["frames"].to_list()]
    top = max(set(places), key=lambda p: (places.count(p), p))
    short = "/".join(top[1].split("/")[-3:]) if top[1] else "?"
    return (
        f"; in Python it was in `{cut(top[0], SAID_MAX)}` ({cut(short, SAID_MAX)}) in {places.count(top) / len(places):.0%} of its "
        f"{len(places):,} Python samples"
    )


def _gap_frames(con, gaps_df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Per gap of `gaps_df` (window_id: its row number): thread states, samples (with short names), and every
    thread's role, process and name."""
    wf = _windows_frame(list(zip(gaps_df["start_ns"].to_list(), gaps_df["end_ns"].to_list())))
    states = run(con, "cpu_window_states", **wf)
    samples = run(con, "cpu_window_samples", **wf).with_columns(function=_function())
    return states, samples, run(con, "cpu_threads")


def _scheduled(con) -> bool:
    return con.execute("SELECT EXISTS (SELECT 1 FROM thread_states WHERE source = 'sched')").fetchall()[0][0]


def gap_rows(con, gaps_df: pl.DataFrame, waiters: pl.DataFrame) -> pl.DataFrame:
    """What the threads did on the CPU during each gap, as rows of gaps.activity (gap_id: the gap's row number in
    `gaps_df`; kind `cpu`, domain: the thread's role): every thread's time on a CPU (scheduling events) with its
    top function in the samples, work; and the waiting thread's (`waiters`: pid, tid of each gap's process) time
    blocked in each OS call, waiting. nsys's own threads are left out. Only where the export has scheduling
    events: without them no time on a CPU is measured, and the waiting thread's wait is the gap's cause."""
    cols = {"gap_id": pl.Int64, "pid": pl.Int64, "process": pl.String, "tid": pl.Int64, "thread": pl.String}
    cols |= {"kind": pl.String, "domain": pl.String, "name": pl.String, "waiting": pl.Boolean, "overlap_ns": pl.Int64}
    if not gaps_df.height or not _scheduled(con):  # no measured time on a CPU: nothing to add
        return pl.DataFrame(schema=cols)
    states, samples, threads = _gap_frames(con, gaps_df)
    gp = gaps_df.with_row_index("window_id").select(pl.col("window_id").cast(pl.Int64), pl.col("pid").alias("_gpid"))
    waiting = waiters.unique().select(pl.col("pid").alias("_gpid"), pl.col("tid").alias("_wtid"), _w=pl.lit(True))
    top = (
        samples.group_by("window_id", "pid", "tid", "function")
        .agg(pl.col("samples").sum())
        .sort(["samples", "function"], descending=[True, False])
        .group_by("window_id", "pid", "tid", maintain_order=True)
        .first()
        .select("window_id", "pid", "tid", "function")
    )
    st = (
        states.join(gp, on="window_id")
        .join(waiting, on="_gpid", how="left")
        .with_columns(
            is_waiter=(
                pl.col("_w").fill_null(False) & (pl.col("pid") == pl.col("_gpid")) & (pl.col("tid") == pl.col("_wtid"))
            )
        )
    )
    on = st.filter(pl.col("state") == "running").join(top, on=["window_id", "pid", "tid"], how="left")
    on = on.with_columns(name=pl.format("on CPU: {}", pl.col("function").fill_null("no samples")), waiting=False)
    blocked = st.filter((pl.col("state") == "blocked") & pl.col("is_waiter"))
    blocked = blocked.with_columns(name=pl.format("blocked in {}", pl.col("call")), waiting=True)
    both = pl.concat([on.select(blocked.columns), blocked], how="vertical_relaxed")
    out = both.join(threads, on=["pid", "tid"], how="left").filter(pl.col("role") != "profiler")
    return out.select(
        pl.col("window_id").alias("gap_id"),
        "pid",
        "process",
        "tid",
        "thread",
        kind=pl.lit("cpu"),
        domain=pl.col("role").fill_null("other"),
        name="name",
        waiting="waiting",
        overlap_ns="overlap_ns",
    ).cast(cols)


def _pct(ns: float, idle: float) -> str:
    return f"{100.0 * ns / idle:.0f}%"


def story(con, gaps_df: pl.DataFrame) -> tuple[str | None, bool, float | None]:
    """What the CPU did during the gaps of `gaps_df` (one cause's), as one sentence; whether it names the data
    loader as what the GPU waited for (the rules above); and the share of the gaps' time the main thread spent on
    a CPU, as scheduling events measure it (None without them: CPU samples give shares of samples, not of time).
    Without scheduling events, the CPU samples taken in the gaps tell who ran, and the data loader is never
    named. (None, False, None) with neither in those gaps."""
    idle = float(gaps_df["duration_ns"].sum() or 0)
    if not idle or not (_scheduled(con) or no_samples(con) is None):  # neither measure anywhere: none in the gaps
        return None, False, None
    states, samples, threads = _gap_frames(con, gaps_df)
    # each gap's process (the one that owns its GPU): its main thread is the one that waited; the main threads of
    # other processes are other threads to it
    gp = gaps_df.with_row_index("window_id").select(pl.col("window_id").cast(pl.Int64), pl.col("pid").alias("_gpid"))
    states, samples = (f.join(gp, on="window_id", how="left") for f in (states, samples))
    sched = states.filter(pl.col("source") == "sched")
    samples = samples.join(threads.select("pid", "tid", "role"), on=["pid", "tid"], how="left")
    samples = samples.filter(pl.col("role").fill_null("other") != "profiler")
    if not sched.height and not samples.height:
        return None, False, None
    mains = threads.filter(pl.col("role") == "main").select("pid", "tid")
    is_main = pl.struct("pid", "tid").is_in(mains.to_struct().implode()) & (
        pl.col("_gpid").is_null() | (pl.col("pid") == pl.col("_gpid"))
    )
    total = int(samples["samples"].sum() or 0) if not sched.height else None
    parts, waited, running = _main_clause(states.filter(is_main), samples.filter(is_main), idle, total)
    waiters = (
        mains.filter(pl.col("pid").is_in(gaps_df["pid"].unique().implode()))
        if gaps_df["pid"].is_not_null().all()
        else mains
    )
    if parts and waiters.height == 1:
        wf = _windows_frame(list(zip(gaps_df["start_ns"].to_list(), gaps_df["end_ns"].to_list())))
        parts[0] += _python_clause(con, wf, *waiters.row(0))
    if sched.height:
        others = sched.filter(~is_main & (pl.col("state") == "running")).join(threads, on=["pid", "tid"], how="left")
        more, loader_ns = _roles_on_cpu(others, samples, threads, idle)
    else:
        more, loader_ns = _roles_sampled(samples.filter(~is_main).join(threads, on=["pid", "tid"]), total), 0.0
    parts += more
    if not parts:
        return None, False, None
    loader = waited >= LOADER_SHARE * idle and loader_ns >= LOADER_SHARE * idle
    return "; ".join(parts), loader, (running / idle if running is not None else None)


def _per_role(rows: pl.DataFrame, weight: str) -> pl.DataFrame:
    """Per role of `rows` (threads' time on a CPU or samples, in column `weight`), most first: the weight, how
    many processes and threads, and their names, most weight first (a role's threads may be of several
    programs). nsys's own threads are left out."""
    rows = rows.with_columns(pl.col("role").fill_null("other")).filter(pl.col("role") != "profiler")
    names = (
        rows.drop_nulls("thread")
        .group_by("role", "thread")
        .agg(pl.col(weight).sum())
        .sort([weight, "thread"], descending=[True, False])
        .group_by("role", maintain_order=True)
        .agg(pl.col("thread").alias("names"))
    )
    return (
        rows.group_by("role")
        .agg(
            pl.col(weight).sum(),
            pl.col("pid").n_unique().alias("processes"),
            pl.struct("pid", "tid").n_unique().alias("n"),
        )
        .join(names, on="role", how="left")
        .sort([weight, "role"], descending=[True, False])
    )


def _roles_on_cpu(others: pl.DataFrame, samples: pl.DataFrame, threads: pl.DataFrame, idle: float):
    """The other threads' part of the story from their time on a CPU (scheduling events), each role told from
    ACTIVITY_MIN_SHARE of the idle time; and the data-loader workers' time on a CPU, ns."""
    parts, loader_ns = [], 0.0
    for r in _per_role(others, "overlap_ns").iter_rows(named=True):
        if r["overlap_ns"] < ACTIVITY_MIN_SHARE * idle:
            continue
        if r["role"] == "data_loader":
            loader_ns = r["overlap_ns"]
        who, verb = _who(r)
        cpus = r["overlap_ns"] / idle
        load = f" ({cpus:.1f} CPUs on average)" if cpus >= 1.05 else ""
        mine = samples.filter(pl.col("role").fill_null("other") == r["role"])
        parts.append(f"{who} {verb} on a CPU for {_pct(r['overlap_ns'], idle)} of it{load}" + _frames(mine))
    return parts, loader_ns


def _roles_sampled(samples: pl.DataFrame, total: int) -> list[str]:
    """Without scheduling events: the other threads' part of the story from their share of the `total` CPU
    samples taken in the gaps (who ran, not for how long), each role told from ACTIVITY_MIN_SHARE of them."""
    said = []
    for r in _per_role(samples, "samples").iter_rows(named=True):
        if r["samples"] >= ACTIVITY_MIN_SHARE * total:
            who, _ = _who(r)
            mine = samples.filter(pl.col("role").fill_null("other") == r["role"])
            said.append(f"{who} had {r['samples']:,} ({_pct(r['samples'], total)})" + _frames(mine))
    if not said:
        return []
    return [
        f"of the {total:,} CPU samples taken then (no scheduling events: they tell who ran, not for how long), "
        + "; ".join(said)
    ]


def _main_clause(states: pl.DataFrame, samples: pl.DataFrame, idle: float, total: int | None = None):
    """The waiting (main) thread's part of the story, how long it was off the CPU (blocked in an OS call or
    descheduled, the longer of the two measures) and how long on a CPU (None where `total` is given). `total`:
    without scheduling events, the CPU samples taken in the gaps, of which the main thread's share is told
    instead of its time on a CPU."""
    by = lambda state: states.filter(pl.col("state") == state)  # noqa: E731
    calls = (
        by("blocked")
        .group_by("call")
        .agg(pl.col("overlap_ns").sum())
        .sort(["overlap_ns", "call"], descending=[True, False])
    )
    running, off = by("running")["overlap_ns"].sum() or 0, by("off_cpu")["overlap_ns"].sum() or 0
    blocked = calls["overlap_ns"].sum() or 0
    said = []
    if calls.height and calls["overlap_ns"][0] >= ACTIVITY_MIN_SHARE * idle:
        more = ", ".join(f"`{c}` {_pct(n, idle)}" for c, n in calls.slice(1, 2).iter_rows() if n >= 0.05 * idle)
        said.append(
            f"waited in `{calls['call'][0]}` for {_pct(calls['overlap_ns'][0], idle)} of that time"
            + (f" (also {more})" if more else "")
        )
    elif off >= ACTIVITY_MIN_SHARE * idle:
        said.append(f"was off the CPU for {_pct(off, idle)} of that time")
    if total is not None:  # no time on a CPU measured: its share of the samples
        mine = int(samples["samples"].sum() or 0) if samples.height else 0
        if total and (mine >= ACTIVITY_MIN_SHARE * total or not said):
            said.append(f"had {mine:,} of the {total:,} CPU samples taken then" + _frames(samples))
    elif running >= ACTIVITY_MIN_SHARE * idle or not said:
        said.append(f"was on a CPU for {_pct(running, idle)} of it" + _frames(samples))
    return (
        ([f"the main thread {' and '.join(said)}"] if said else []),
        max(blocked, off),
        None if total is not None else float(running),
    )


def _who(r: dict) -> tuple[str, str]:
    """Who a role's row of _per_role is (how many threads, in how many processes, their names), and its verb."""
    one, many = _ROLE_WORDS.get(r["role"], (r["role"], r["role"]))
    n, procs, names = r["n"], r["processes"], r["names"] or []
    said = names[:3] + (["…"] if len(names) > 3 else [])
    if r["role"] in ("data_loader", "child_process") and procs == 1 and n > 1:  # a role of processes: one, threads
        who, said, verb = f"a {one} process", said + [f"{n} threads"], "was"
    elif r["role"] in ("data_loader", "child_process") and procs > 1:
        who, verb = f"{procs} {one} processes", "were"
    elif n > 1:
        who, verb = f"{n} {many}" + (f" in {procs} processes" if procs > 1 else ""), "were"
    else:
        who, verb = f"the {one}", "was"
    return who + (f" ({', '.join(said)})" if said else ""), verb


# the most of a name (a frame's function, a Python place, a file) that a sentence quotes: a JIT or a template can name
# a frame in kilobytes, and one such name made the sentence that quoted it 10 kB long; `cpu`'s rows have it whole
SAID_MAX = 200


# a frame nsys could not symbolize is named by its address alone (65_cpu_samples.sql): one such address says
# nothing a reader can act on, so their samples are said together, as unresolved addresses
UNRESOLVED = "unresolved addresses"
_ADDRESS = r"^0[xX][0-9a-fA-F]+$"


def _frames(samples: pl.DataFrame, n: int = 3) -> str:
    """`, top frames `f` 30%, ...` of these samples (share of them), or nothing without samples. Frames named by
    an address alone count together as UNRESOLVED, said without quotes."""
    total = samples["samples"].sum() if samples.height else 0
    if not total:
        return ""
    named = pl.when(pl.col("function").str.contains(_ADDRESS)).then(None).otherwise(pl.col("function"))
    top = (
        samples.group_by(named.alias("function"))
        .agg(pl.col("samples").sum())
        .sort(["samples", "function"], descending=[True, False], nulls_last=True)
        .head(n)
    )
    said = ", ".join(
        f"`{cut(f, SAID_MAX)}` {_pct(c, total)}" if f is not None else f"{UNRESOLVED} {_pct(c, total)}"
        for f, c in top.iter_rows()
    )
    return f", top frames {said} (of {total:,} sample{'s' if total != 1 else ''})"


def stories(con, gaps_df: pl.DataFrame) -> pl.DataFrame:
    """Per cause of `gaps_df` (the steady-state gaps where they carry iterations, as gaps.by_cause counts), largest
    idle first: the story of what the CPU did meanwhile (story), and whether it names the data loader; `told`:
    whether the export's scheduling events or CPU samples tell it (without either, `meanwhile` is the one line
    saying which capture switch records them)."""
    from .advice import switch

    g = gaps_df
    if g.height and g["iteration"].is_not_null().any():
        g = g.filter(pl.col("iteration").is_not_null() & ~pl.col("warmup"))
    causes = g.group_by("cause").agg(pl.len().alias("gaps"), pl.col("duration_ns").sum().alias("idle_ns"))
    rows, scheduled = [], _scheduled(con)
    for cause, n, idle in causes.sort(["idle_ns", "cause"], descending=[True, False]).iter_rows():
        said, loader, _ = story(con, g.filter(pl.col("cause") == cause))
        told = said is not None
        if not told and not scheduled:
            said = f"no scheduling events in this profile: record them with {switch('scheduling')}"
        rows.append((cause, n, idle, said, loader, told))
    schema = {"cause": pl.String, "gaps": pl.Int64, "idle_ns": pl.Int64, "meanwhile": pl.String}
    schema |= {"data_loader": pl.Boolean, "told": pl.Boolean}
    return pl.DataFrame(rows, schema=schema, orient="row")


def meanwhile(said: pl.DataFrame) -> pl.DataFrame:
    """The sentences under `gaps --explain`'s table, from stories' rows (`said`): each cause's that tells what
    the CPU did (`told`), in their order, then once each, sorted, those about time on a CPU that tell nothing of
    a cause (`cause` null)."""
    said = said.drop_nulls("meanwhile")
    told = said.filter(pl.col("told").fill_null(False).cast(pl.Boolean)).select("cause", "meanwhile")
    rest = sorted(set(said.filter(~pl.col("told").fill_null(False).cast(pl.Boolean))["meanwhile"].to_list()))
    alone = pl.DataFrame({"cause": [None] * len(rest), "meanwhile": rest}, schema=told.schema)
    return pl.concat([told, alone])
