"""The rows of a timeline trace (`nsysql trace`): GPU work per device and stream, CUDA API calls and NVTX ranges
per thread, and nsysql's own annotations (iterations, idle gaps with their cause), all within one window of time.

The rows come from queries/v1/analyses/trace_*.sql over the canonical tables, and from the iterations and gaps
analyses; nsysql.perfetto writes them as Chrome/Perfetto trace-event JSON.
"""

from __future__ import annotations

import polars as pl

from .. import queries
from ..engine import reading
from ..errors import NsysqlError
from ._sql import frame, run
from .gaps import parse_duration

NO_SPAN = "the profile has no timed events, so no timeline"
# the span comes from other events too (OS runtime calls, CPU samples), which a trace does not show
NO_EVENTS = (
    "no GPU op, CUDA API call or NVTX range in the profile: nothing a trace shows (`nsysql info` says what it holds)"
)


def span(con) -> tuple[int, int]:
    """The profile's span, ns: (start, end)."""
    s, e = run(con, "trace_span").row(0)
    if s is None or e is None:
        raise NsysqlError(NO_SPAN)
    return int(s), int(e)


def refusal(con) -> str | None:
    """Why the whole profile's trace would show nothing (no span, or none of the events it shows), or None."""
    s, e = run(con, "trace_span").row(0)
    if s is None or e is None:
        return NO_SPAN
    shown = "SELECT EXISTS (SELECT 1 FROM gpu_ops) OR EXISTS (SELECT 1 FROM api_calls) OR EXISTS (SELECT 1 FROM nvtx_ranges)"
    return None if con.execute(shown).fetchall()[0][0] else NO_EVENTS


def parse_window(text: str, start: int, end: int) -> tuple[int, int]:
    """`START:END` (durations from the start of the profile: `2s:3.5s`, `1500ms:`, `:2s`) -> ns on the export's
    clock, clipped to the profile's span [start, end]."""
    if text.count(":") != 1:
        raise NsysqlError(
            f"`window` is START:END, durations from the start of the profile (e.g. 2s:3.5s), not {text!r}",
            option="window",
        )
    a, b = (x.strip() for x in text.split(":"))
    t0 = start + parse_duration(a) if a else start
    t1 = start + parse_duration(b) if b else end
    if t0 > end:  # before END's check: `10s:` on a 9 s profile ends at the profile's end, before its START
        raise NsysqlError(
            f"`window` {text}: starts after the profile ends ({(end - start) / 1e9:.3f} s long)", option="window"
        )
    if t1 <= t0:
        raise NsysqlError(f"`window` {text}: END must be after START", option="window")
    return t0, min(t1, end)


EVENT_TABLES = ("gpu_ops", "api_calls", "nvtx_ranges", "iterations", "gaps")


def check_window(
    got: dict[str, pl.DataFrame], text: str | None, start: int, end: int, its: pl.DataFrame | None
) -> None:
    """An NsysqlError when the rows `got` of the window `text` (None: the whole profile) hold no event at all (an
    empty timeline is no answer): what the window was, the profile's span and, where there are iterations, where
    they lie."""
    if any(got[k].height if isinstance(got[k], pl.DataFrame) else got[k].exists() for k in EVENT_TABLES if k in got):
        return
    if text is None:  # (refusal says it before the rows are read; the window of a profile with events holds some)
        raise NsysqlError(NO_EVENTS)
    t0, t1 = (int(v) for v in got["window"].row(0))
    where = ""
    if its is not None and its.height:
        where = f"; its iterations run {_s(int(its['start_ns'].min()) - start)}..{_s(int(its['end_ns'].max()) - start)}"
    raise NsysqlError(
        f"`window` {text}: nothing in {_s(t0 - start)}..{_s(t1 - start)} (no GPU op, CUDA API call or NVTX range); "
        f"the profile spans 0 s..{_s(end - start)}{where}",
        option="window",
    )


def _s(ns: int) -> str:
    """ns as seconds for a sentence: `2 s`, `3.606874 s` (to the microsecond, trailing zeros dropped)."""
    return f"{ns / 1e9:.6f}".rstrip("0").rstrip(".") + " s"


def parse_iterations(text: str) -> tuple[int, int]:
    """`A:B` (iteration numbers as `nsysql iterations` shows them, both included; `A` alone is one) -> (A, B)."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            a = b = int(parts[0])
        elif len(parts) == 2:
            a = int(parts[0]) if parts[0].strip() else 0
            b = int(parts[1]) if parts[1].strip() else 2**62
        else:
            raise ValueError
    except ValueError:
        raise NsysqlError(
            f"`iterations` is A:B (iteration numbers, both included), not {text!r}", option="iterations"
        ) from None
    if b < a:
        raise NsysqlError(f"`iterations` {text}: B must not be before A", option="iterations")
    return a, b


def iterations_window(its: pl.DataFrame, a: int, b: int) -> tuple[int, int]:
    """From the start of iteration `a` to the end of iteration `b` (ns)."""
    sel = its.filter(pl.col("iteration").is_between(a, b))
    if sel.height == 0:
        last = its["iteration"].max() if its.height else None
        raise NsysqlError(
            f"`iterations` {a}:{b}: no such iterations (the profile has 0 to {last})", option="iterations"
        )
    return int(sel["start_ns"].min()), int(sel["end_ns"].max())


class Lazy:
    """The rows of one trace query (trace_gpu_ops, trace_api_calls, trace_nvtx) over [t0, t1], not fetched: its
    distinct lanes, and its rows in the query's order a batch at a time, each time asked (so a whole profile's
    trace never sits in memory; DuckDB sorts within its memory limit, spilling beyond it)."""

    def __init__(self, con, name: str, t0: int, t1: int):
        self._con, self._params = con, {"t0": t0, "t1": t1}
        reading(name)  # built now: its rows are read after the analysis returns
        self._sql = queries.read(f"analyses/{name}.sql").strip().rstrip(";")

    def distinct(self, cols: list[str]) -> pl.DataFrame:
        """The distinct values of `cols`, sorted with nulls first (as polars sorts)."""
        names = ", ".join(f'"{c}"' for c in cols)
        order = ", ".join(f'"{c}" NULLS FIRST' for c in cols)
        sql = f"SELECT DISTINCT {names} FROM (\n{self._sql}\n) ORDER BY {order}"
        return frame(self._con, sql, self._params)

    def exists(self) -> bool:
        """Whether the query has a row at all."""
        return bool(self._con.execute(f"SELECT EXISTS (\n{self._sql}\n)", self._params).fetchall()[0][0])

    def batches(self, size: int):
        """The rows, in the query's order, as DataFrames of at most `size` rows."""
        reader = self._con.sql(self._sql, params=self._params).to_arrow_reader(size)
        for batch in reader:
            if batch.num_rows:
                yield pl.from_arrow(batch)


def rows(
    con, t0: int, t1: int, its: pl.DataFrame | None, gaps: pl.DataFrame | None, lazy: bool = False
) -> dict[str, pl.DataFrame | Lazy]:
    """Everything overlapping [t0, t1] (ns): `gpu_ops`, `api_calls`, `nvtx_ranges` (DataFrames, or with `lazy`
    Lazy tables, read a batch at a time), `names` (of processes, threads and GPUs), `iterations` (iteration, name,
    start_ns, duration_ns, warmup, outlier, gpu_busy_ns, idle_ns, kernels) and `gaps` (device_id, start_ns,
    duration_ns, cause and its evidence); `window`: t0 and t1."""
    table = (lambda name: Lazy(con, name, t0, t1)) if lazy else (lambda name: run(con, name, t0=t0, t1=t1))
    out = {
        "gpu_ops": table("trace_gpu_ops"),
        "api_calls": table("trace_api_calls"),
        "nvtx_ranges": table("trace_nvtx"),
        "names": run(con, "trace_names"),
        "window": pl.DataFrame({"start_ns": [t0], "end_ns": [t1]}),
    }
    # an iteration or gap shares time with the window, not only an edge (an iteration ends where the next starts)
    inside = (pl.col("start_ns") < t1) & (pl.col("end_ns") > t0)
    inside = inside | ((pl.col("start_ns") == pl.col("end_ns")) & pl.col("start_ns").is_between(t0, t1))
    if its is not None and its.height:
        out["iterations"] = its.filter(inside).select(
            "iteration",
            "name",
            "start_ns",
            (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
            "warmup",
            "outlier",
            "gpu_busy_ns",
            "idle_ns",
            "kernels",
        )
    if gaps is not None and gaps.height:
        out["gaps"] = gaps.filter(inside).select(
            "device_id",
            "pid",
            "start_ns",
            "duration_ns",
            "iteration",
            "warmup",
            "cause",
            "range",
            "api_call",
            "api_cover_pct",
            "os_call",
        )
    return out
