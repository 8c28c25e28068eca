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
- Roles are thread_roles' (queries/v1/canonical/66_cpu_threads.sql). nsys's and CUPTI's own threads (role
  `profiler`) are left out of the gap story.
- What the threads did during gaps (`gap_rows`, `story`): the waiting (main) thread's time blocked in OS calls
  (by call) and on a CPU (with its top frames), and every other thread's on-CPU time with its top frame; a role
  is told when its threads were on a CPU for at least ACTIVITY_MIN_SHARE of the idle time. The data loader is
  named as what the GPU waited for when, in those gaps, the waiting thread was off the CPU (blocked or
  descheduled) for at least LOADER_SHARE of the idle time and the data-loader workers were on a CPU for at least
  LOADER_SHARE of it: the loop waited for a batch while the workers made it.
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import NsysqlError
from ._sql import run

BYS = ("function", "module", "thread", "process")
LOADER_SHARE = 0.50
_INT64 = (-(2**62), 2**62)  # the whole profile as one window (is_interval's bounds)
_ROLE_WORDS = {
    "data_loader": ("data-loader worker", "data-loader workers"),
    "autograd": ("autograd thread", "autograd threads"),
    "nccl": ("NCCL thread", "NCCL threads"),
    "cuda_event_handler": ("CUDA event handler", "CUDA event handlers"),
    "launcher": ("launching thread", "launching threads"),
    "child_process": ("child process thread", "child process threads"),
    "main": ("main thread", "main threads"),
    "other": ("other thread", "other threads"),
}


def parse_during(text: str | None) -> tuple[str | None, str | None]:
    """`gaps`, `iterations A:B` or `range P` (a space, `=` or `:` after the word) -> (kind, argument)."""
    if text is None:
        return None, None
    m = re.fullmatch(r"\s*(gaps|iterations|range)(?:[\s=:]+(.*))?", str(text)[:1000], re.S)
    if not m or (m.group(1) != "gaps" and not (m.group(2) or "").strip()):
        raise NsysqlError(f"`during` is gaps, iterations A:B or range PATTERN, not {str(text)[:60]!r}", option="during")
    return m.group(1), (m.group(2) or "").strip() or None


def merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The windows sorted and merged where they overlap or touch, so that no instant counts twice."""
    out: list[list[int]] = []
    for s, e in sorted(windows):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def short_name(frame: str | None) -> str:
    """A frame's function as the rules above name it."""
    if not frame:
        return "?"
    s = frame.replace("(anonymous namespace)::", "")
    inner = _wrapped(s)
    if inner:
        return inner
    while True:  # template arguments, innermost first
        t = re.sub(r"<[^<>]*>", "", s)
        if t == s:
            break
        s = t
    s = s.split("(", 1)[0].strip()  # the parameters
    return s.rsplit(" ", 1)[-1] or frame  # the return type


def _wrapped(s: str) -> str | None:
    """The function a template instance wraps: the first qualified name followed by `(` inside its template
    arguments (see the rules above), or None."""
    lt = s.find("<")
    if lt < 0 or s.find("(") < lt:
        return None
    m = re.search(r"([A-Za-z_][\w]*(?:::[A-Za-z_~][\w]*)+)\(", s[lt:])
    return m.group(1) if m else None


def windows(con, kind: str | None, arg: str | None, gaps_df=None, spans=None) -> list[tuple[int, int]]:
    """The windows of a `during` (parse_during): `gaps_df` for gaps, `spans` (iteration spans) for iterations."""
    if kind is None:
        return [_INT64]
    if kind == "gaps":
        if gaps_df is None or not gaps_df.height:
            raise NsysqlError("no GPU idle gaps of 1 ms or more in this profile: nothing to read during them")
        return list(zip(gaps_df["start_ns"].to_list(), gaps_df["end_ns"].to_list()))
    if kind == "iterations":
        from .trace import parse_iterations

        if spans is None:
            raise NsysqlError(
                "no repeating loop found, so no iterations to read during (give `during` as range PATTERN)"
            )
        a, b = parse_iterations(arg)
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


def _windows_frame(wins: list[tuple[int, int]]) -> dict:
    return {"ids": list(range(len(wins))), "starts": [s for s, _ in wins], "ends": [e for _, e in wins]}


def no_samples(con) -> str | None:
    """The one line saying why there is nothing to answer from, with the capture switch that records it; None
    when the export has CPU samples."""
    from .advice import switch

    if con.execute("SELECT EXISTS (SELECT 1 FROM cpu_samples)").fetchall()[0][0]:
        return None
    return f"no CPU samples in this profile: record them with {switch('cpu_samples')}"


def cpu(con, wins: list[tuple[int, int]], by: str = "function") -> pl.DataFrame:
    """Where CPU time went in the windows `wins`, from the samples: one row per function (with its module), module,
    thread or process, most samples first; pct is of the samples in the windows."""
    if by not in BYS:
        raise NsysqlError(f"`by` must be one of {', '.join(BYS)}, not {by!r}", option="by")
    why = no_samples(con)
    if why:
        raise NsysqlError(why)
    wf = _windows_frame(merged(wins))
    s = run(con, "cpu_window_samples", **wf).with_columns(
        function=pl.col("leaf_frame").map_elements(short_name, return_dtype=pl.String)
    )
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


def _by_threads(con, s: pl.DataFrame, wf: dict, by: str, pct: pl.Expr) -> pl.DataFrame:
    """cpu() per thread or process: samples, on-CPU time from scheduling, the top function, the role."""
    keys = ["pid", "tid"] if by == "thread" else ["pid"]
    threads = run(con, "cpu_threads")
    on = (
        run(con, "cpu_window_states", **wf)
        .filter(pl.col("state") == "running")
        .group_by(keys)
        .agg(pl.col("overlap_ns").sum().alias("on_cpu_ns"))
    )
    top = (
        s.group_by(*keys, "function")
        .agg(pl.col("samples").sum())
        .sort(["samples", "function"], descending=[True, False])
        .group_by(keys, maintain_order=True)
        .first()
        .select(*keys, pl.col("function").alias("top_function"))
    )
    agg = s.group_by(keys).agg(pl.col("samples").sum(), pl.struct("pid", "tid").n_unique().alias("threads"))
    if by == "thread":
        who = threads.select("pid", "process", "tid", "thread", "role")
        out = agg.drop("threads").join(who, on=keys, how="left")
    else:  # the process's role: its own thread's (tid = pid), else that of its thread with most samples
        own = threads.filter(pl.col("pid") == pl.col("tid")).select("pid", "process", pl.col("role"))
        out = agg.join(own, on="pid", how="left")
    out = out.join(on, on=keys, how="left").join(top, on=keys, how="left").with_columns(pct=pct)
    cols = ["pid", "process"] + (["tid", "thread"] if by == "thread" else ["threads"])
    cols += ["role", "samples", "pct", "on_cpu_ns", "top_function"]
    return out.sort(["samples", *keys], descending=[True] + [False] * len(keys)).select(cols)


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
