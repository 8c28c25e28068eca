"""Chrome/Perfetto trace-event JSON (`nsysql trace`): the rows of Profile.trace() as one timeline that opens in
ui.perfetto.dev and chrome://tracing.

Front end: no SQL; it lays the rows out on tracks and writes them. The format: a JSON object whose `traceEvents`
list holds complete events (`ph: "X"`, `ts` and `dur` in microseconds, as floats: ns / 1000), async begin/end
pairs (`ph: "b"`/`"e"`, for NVTX start/end ranges, which may overlap on a thread) and metadata events
(`ph: "M"`) that name processes and threads and order them.

Tracks (`pid`/`tid`): each GPU is a process, each of its streams a thread (and, where ops of one stream overlap in
time, a lane track beside it for those that would not nest: _Lanes); each profiled process keeps its pid,
and each of its threads gets one track for its CUDA API calls and one per NVTX domain (slices on one track must
nest, and API calls and NVTX ranges need not nest within each other); nsysql's annotations are one more process:
the iterations (warm-up and outliers in their names) and the idle gaps of each GPU, named by their cause. Those
made-up pids and tids start above 2^22, Linux's largest pid, so they never meet a real one.

Streamed: the GPU ops, API calls and NVTX ranges may come as nsysql.analyses.trace.Lazy tables, read from DuckDB a
batch of CHUNK rows at a time and written as they come, so memory holds one batch and its JSON, never the
whole trace (the tracks are laid out first, from the distinct lanes DuckDB lists; a stream's overlap lanes are
named in the batch that first needs one). A DataFrame gives the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from . import __version__
from .analyses.gaps import DEFAULT_MIN_NS

SYNTHETIC = 1 << 23  # made-up pids and tids start here: above Linux's pid_max limit (2^22)
ANNOTATIONS_PID = SYNTHETIC
GPU_PID = SYNTHETIC + 1  # + device id
# the GPU of ops whose device the export does not name (a GPU table without deviceId): a track of its own, below
# SYNTHETIC and above Linux's pid_max limit as well
NO_DEVICE_PID = SYNTHETIC - 1


def _gpu_pid(dev: int | None) -> int:
    return NO_DEVICE_PID if dev is None else GPU_PID + dev


# the shortest gap the trace shows: the gaps analysis' default, which the trace asks (analyses.catalog.trace)
GAPS_MIN = f"{DEFAULT_MIN_NS / 1e6:g} ms"
CHUNK = 20_000  # rows read, encoded and written at a time (about 5 MB of JSON, at ~250 bytes an event)


def _us(col: str | pl.Expr) -> pl.Expr:
    """ns -> µs, as the nearest float to ns / 1000 (the column `_k` of `_thousands`: polars divides a column by a
    scalar through its reciprocal, which is off by one unit in the last place for about one value in eight)."""
    return (pl.col(col) if isinstance(col, str) else col).cast(pl.Float64) / pl.col("_k")


def _thousands(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with a column `_k` of 1000.0 (see _us)."""
    if df.height == 0:  # a window with none of this kind of event: a Series of one would not fit
        return df.with_columns(pl.Series("_k", [], pl.Float64))
    return df.with_columns(pl.Series("_k", [1000.0], pl.Float64).extend_constant(1000.0, df.height - 1))


def _distinct(table, cols: list[str]) -> pl.DataFrame:
    """The distinct values of `cols` in `table` (a DataFrame or a trace.Lazy), sorted, nulls first."""
    if isinstance(table, pl.DataFrame):
        return table.select(cols).unique().sort(cols)
    return table.distinct(cols)


def _batches(table):
    """The rows of `table` (a DataFrame or a trace.Lazy) in order, CHUNK rows at a time."""
    if isinstance(table, pl.DataFrame):
        for i in range(0, table.height, CHUNK):
            yield table.slice(i, CHUNK)
    else:
        yield from table.batches(CHUNK)


class _Tracks:
    """The metadata events that name and order processes and tracks, collected while the tracks are laid out (they
    lead the file), and the next made-up track id."""

    def __init__(self) -> None:
        self.meta: list[dict] = []
        self.next_tid = SYNTHETIC + 1

    def track(self, pid: int, label: str, sort: int) -> int:
        tid = self.next_tid
        self.next_tid += 1
        self.meta.append(_meta("thread_name", pid, tid, {"name": label}))
        self.meta.append(_meta("thread_sort_index", pid, tid, {"sort_index": sort}))
        return tid

    def process(self, pid: int, label: str, sort: int) -> None:
        self.meta.append(_meta("process_name", pid, 0, {"name": label}))
        self.meta.append(_meta("process_sort_index", pid, 0, {"sort_index": sort}))


def events(tables: dict, counts: dict | None = None) -> Iterator[pl.DataFrame]:
    """The trace's events as frames of one JSON object per row (column `e`), metadata first; the GPU ops, API
    calls and NVTX ranges a batch at a time. `counts` gets the rows read of each of those tables."""
    counts = {} if counts is None else counts
    names = tables["names"]
    dev_name = {r["id"]: r["name"] for r in names.filter(pl.col("kind") == "device").iter_rows(named=True)}
    tracks = _Tracks()
    # every track first (the metadata leads the file); the events after it, in this order
    annotations = _annotations(tables, tracks)
    ops, api, nvtx = tables["gpu_ops"], tables["api_calls"], tables["nvtx_ranges"]
    stream_tids = _gpu_tracks(ops, dev_name, tracks)
    api_tids, nvtx_tids = _cpu_tracks(names, ops, api, nvtx, tracks)

    yield _meta_frame(tracks.meta)
    yield from annotations
    yield from _gpu_op_events(ops, stream_tids, counts, tracks)
    yield from _api_events(api, api_tids, counts)
    yield from _nvtx_events(nvtx, nvtx_tids, counts)


def _annotations(tables: dict, tracks: _Tracks) -> list[pl.DataFrame]:
    """nsysql's own tracks: the iterations (warm-up and outliers named) and each GPU's idle gaps by cause."""
    annotations: list = []
    its, gaps = tables.get("iterations"), tables.get("gaps")
    if its is not None or gaps is not None:
        tracks.process(ANNOTATIONS_PID, "nsysql: iterations and idle gaps", -100)
    if its is not None:
        tid = tracks.track(ANNOTATIONS_PID, "iterations", 0)
        label = pl.format("iteration {}", pl.col("iteration"))
        label = (
            pl.when(pl.col("warmup"))
            .then(pl.format("{} (warm-up)", label))
            .when(pl.col("outlier"))
            .then(pl.format("{} (outlier)", label))
            .otherwise(label)
        )
        annotations.append(
            _complete(
                its,
                label,
                "iteration",
                pl.lit(ANNOTATIONS_PID),
                pl.lit(tid),
                {
                    "range": pl.col("name"),
                    "warmup": pl.col("warmup"),
                    "outlier": pl.col("outlier"),
                    "wall_ms": pl.col("duration_ns") / 1e6,
                    "gpu_busy_ms": pl.col("gpu_busy_ns") / 1e6,
                    "gpu_idle_ms": pl.col("idle_ns") / 1e6,
                    "kernels": pl.col("kernels"),
                },
            )
        )
    if gaps is not None:
        for i, dev in enumerate(gaps["device_id"].unique().sort().to_list()):
            tid = tracks.track(ANNOTATIONS_PID, f"idle gaps >= {GAPS_MIN}, GPU {dev} (cause)", 1 + i)
            annotations.append(
                _complete(
                    gaps.filter(pl.col("device_id") == dev),
                    pl.format("idle: {}", pl.col("cause")),
                    "gap",
                    pl.lit(ANNOTATIONS_PID),
                    pl.lit(tid),
                    {
                        "cause": pl.col("cause"),
                        "range": pl.col("range"),
                        "api_call": pl.col("api_call"),
                        "api_cover_pct": pl.col("api_cover_pct"),
                        "os_call": pl.col("os_call"),
                        "iteration": pl.col("iteration"),
                        "idle_ms": pl.col("duration_ns") / 1e6,
                    },
                )
            )
    return annotations


def _gpu_tracks(ops, dev_name: dict, tracks: _Tracks) -> pl.DataFrame:
    """GPU work: a process per device, a track per stream; (device_id, stream_id) -> `_tid`."""
    streams = _distinct(ops, ["device_id", "stream_id"])
    tids = []
    for dev in streams["device_id"].unique().sort().to_list():
        if dev is None:
            tracks.process(NO_DEVICE_PID, "GPU (device not named in the export)", -51)
            continue
        tracks.process(GPU_PID + dev, f"GPU {dev}" + (f": {dev_name[dev]}" if dev_name.get(dev) else ""), -50 + dev)
    for dev, stream in streams.iter_rows():
        tids.append(tracks.track(_gpu_pid(dev), f"stream {stream}", stream))
    return streams.with_columns(_tid=pl.Series(tids, dtype=pl.Int64))


def _cpu_tracks(names: pl.DataFrame, ops, api, nvtx, tracks: _Tracks) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The CPU side: each process that called, launched or annotated, and per thread one track of CUDA API calls
    and one per NVTX domain; (pid, tid) -> `_tid` and (pid, tid, domain) -> `_tid`."""
    thread_name = {
        (r["id"], r["sub_id"]): r["name"] for r in names.filter(pl.col("kind") == "thread").iter_rows(named=True)
    }
    proc_name = {r["id"]: r["name"] for r in names.filter(pl.col("kind") == "process").iter_rows(named=True)}
    pids = sorted(
        set(_distinct(api, ["pid"])["pid"].to_list())
        | set(_distinct(nvtx, ["pid"])["pid"].to_list())
        | set(_distinct(ops, ["pid"])["pid"].to_list())
        - {None}  # an op whose process the export does not name (a GPU table without globalPid): no CPU track
    )
    for pid in pids:
        tracks.process(pid, f"{proc_name.get(pid) or 'process'} {pid}", pid)

    def thread_label(pid: int, tid: int, what: str) -> str:
        return f"{thread_name.get((pid, tid)) or 'thread'} {tid}: {what}"

    lanes = _distinct(api, ["pid", "tid"])
    tids = [tracks.track(pid, thread_label(pid, tid, "CUDA API"), 2 * tid) for pid, tid in lanes.iter_rows()]
    api_tids = lanes.with_columns(_tid=pl.Series(tids, dtype=pl.Int64))
    lanes = _distinct(nvtx, ["pid", "tid", "domain"])
    tids = [
        tracks.track(pid, thread_label(pid, tid, f"NVTX {domain}" if domain else "NVTX"), 2 * tid + 1)
        for pid, tid, domain in lanes.iter_rows()
    ]
    return api_tids, lanes.with_columns(_tid=pl.Series(tids, dtype=pl.Int64))


def _meta_frame(meta: list[dict]) -> pl.DataFrame:
    return pl.DataFrame({"e": [json.dumps(m, ensure_ascii=False) for m in meta]}, schema={"e": pl.String})


class _Lanes:
    """Ops of one stream that overlap in time (a kernel launched with programmatic dependent launch starts before
    the one before it ends; unified-memory migrations overlap) cannot share a track, where slices must nest: each
    op goes to the first lane of its stream free at its start (lane 0, the stream's own track, unless an earlier
    op still runs there), greedily in start order as the rows come. A lane past 0 is a track of its own, named
    where first used. Rows whose stream has ended every earlier op (nearly all) take lane 0 without a loop."""

    KEY = ["device_id", "stream_id"]

    def __init__(self, tracks: _Tracks, stream_tids: pl.DataFrame):
        self.tracks = tracks
        self.ends: dict[tuple, list[int]] = {}  # (device, stream) -> the end of the last op on each lane
        self.own = stream_tids  # (device, stream) -> the stream's own track, lane 0
        self.made: set[tuple] = set()  # (device, stream, lane) of the lane tracks made
        self.tids = stream_tids.with_columns(_lane=pl.lit(0, pl.Int64))  # (device, stream, lane) -> `_tid`

    def assign(self, batch: pl.DataFrame) -> tuple[pl.DataFrame, list[dict]]:
        """`batch` with `_tid`, its lane's track, and the metadata of the lanes it opened."""
        if self._serial(batch):
            return batch.join(self.own, on=self.KEY, how="left", maintain_order="left", nulls_equal=True), []
        return self._lanes(batch)

    def _serial(self, batch: pl.DataFrame) -> bool:
        """Whether each op of `batch` starts once the op before it on its stream has ended (and so every earlier
        one: their ends then only grow), as on nearly every stream: then all take lane 0, found without a
        window over the rows, and each stream's lanes end where its last op of the batch does."""
        same = pl.all_horizontal(pl.col(k).eq_missing(pl.col(k).shift(1)) for k in self.KEY)  # as the row before
        chk = batch.select(*self.KEY, "start_ns", _end=pl.col("start_ns") + pl.col("duration_ns"), _same=same)
        if not chk.select((~pl.col("_same") | (pl.col("start_ns") >= pl.col("_end").shift(1))).all()).item():
            return False
        for dev, stream, start in chk.filter(~pl.col("_same")).select(*self.KEY, "start_ns").iter_rows():
            if max(self.ends.get((dev, stream), [start])) > start:  # an op of an earlier batch still runs
                return False
        last = (~pl.col("_same")).shift(-1, fill_value=True)  # the last row of its stream in the batch
        for dev, stream, stop in chk.filter(last).select(*self.KEY, "_end").iter_rows():
            self.ends[(dev, stream)] = [stop]
        return True

    def _lanes(self, batch: pl.DataFrame) -> tuple[pl.DataFrame, list[dict]]:
        """`batch` with `_tid`, ops placed greedily on their stream's lanes (see the class)."""
        meta_at = len(self.tracks.meta)
        carried = pl.DataFrame(
            [(d, s, max(v)) for (d, s), v in self.ends.items()],
            schema={"device_id": batch.schema["device_id"], "stream_id": batch.schema["stream_id"], "_c": pl.Int64},
            orient="row",
        )
        end = pl.col("start_ns") + pl.col("duration_ns")
        b = batch.join(carried, on=self.KEY, how="left", maintain_order="left", nulls_equal=True)
        b = b.with_columns(_end=end, _before=pl.max_horizontal(end.cum_max().shift(1).over(self.KEY), "_c"))
        # free: every earlier op of its stream has ended, so lane 0 is free
        b = b.with_columns(_free=pl.col("_before").is_null() | (pl.col("start_ns") >= pl.col("_before")))
        lanes = [0] * b.height
        if not b["_free"].all():
            # lane 0's end before each row, from the rows of this batch before it that took it as free
            lane0 = pl.when("_free").then("_end").cum_max().forward_fill().shift(1).over(self.KEY)
            rows = b.with_columns(_i=pl.int_range(pl.len()), _lane0=lane0).filter(~pl.col("_free"))
            for i, dev, stream, start, stop, first in rows.select(
                "_i", *self.KEY, "start_ns", "_end", "_lane0"
            ).iter_rows():
                lanes[i] = self._place((dev, stream), start, stop, first)
        for dev, stream, stop in b.filter("_free").group_by(self.KEY).agg(pl.col("_end").max()).iter_rows():
            ends = self.ends.setdefault((dev, stream), [stop])
            ends[0] = max(ends[0], stop)
        b = b.with_columns(_lane=pl.Series(lanes, dtype=pl.Int64))
        b = b.join(self.tids, on=[*self.KEY, "_lane"], how="left", maintain_order="left", nulls_equal=True)
        return b, self.tracks.meta[meta_at:]

    def _place(self, key: tuple, start: int, stop: int, lane0_end: int | None) -> int:
        """The first lane of stream `key` free at `start` (a new one if none), now busy until `stop`."""
        ends = self.ends.setdefault(key, [lane0_end if lane0_end is not None else start])
        if lane0_end is not None:
            ends[0] = max(ends[0], lane0_end)
        lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(stop)
        if (*key, lane) not in self.made and lane:  # a track per lane, made once (a stream's ends may be reset)
            self.made.add((*key, lane))
            dev, stream = key
            tid = self.tracks.track(_gpu_pid(dev), f"stream {stream}: overlapping ops, lane {lane + 1}", stream)
            row = pl.DataFrame({"device_id": [dev], "stream_id": [stream], "_tid": [tid], "_lane": [lane]})
            self.tids = pl.concat([self.tids, row.cast(self.tids.schema)])
        ends[lane] = stop
        return lane


def _gpu_op_events(ops, stream_tids: pl.DataFrame, counts: dict, tracks: _Tracks) -> Iterator[pl.DataFrame]:
    counts["gpu_ops"] = 0
    lanes = _Lanes(tracks, stream_tids)
    for batch in _batches(ops):
        counts["gpu_ops"] += batch.height
        batch, meta = lanes.assign(batch.drop("_tid", strict=False))
        if meta:  # the lanes this batch opened, named before their first event
            yield _meta_frame(meta)
        yield _complete(
            batch,
            pl.col("name"),
            pl.col("kind"),
            (GPU_PID + pl.col("device_id")).fill_null(NO_DEVICE_PID),
            pl.col("_tid"),
            {
                "pid": pl.col("pid"),
                "correlation_id": pl.col("correlation_id"),
                "launched_by": pl.col("api_name"),
                "bytes": pl.col("bytes"),
                "graph_node_id": pl.col("graph_node_id"),
            },
        )


def _api_events(api, api_tids: pl.DataFrame, counts: dict) -> Iterator[pl.DataFrame]:
    counts["api_calls"] = 0
    for batch in _batches(api):
        counts["api_calls"] += batch.height
        yield _complete(
            batch.join(api_tids, on=["pid", "tid"], maintain_order="left"),
            pl.col("name"),
            "cuda_api",
            pl.col("pid"),
            pl.col("_tid"),
            {"tid": pl.col("tid"), "correlation_id": pl.col("correlation_id")},
        )


def _nvtx_events(nvtx, nvtx_tids: pl.DataFrame, counts: dict) -> Iterator[pl.DataFrame]:
    """Push/pop ranges as complete events, then start/end ranges (which may overlap each other) as async pairs
    matched by id: every begin, then every end (one pass over the ranges each)."""
    counts["nvtx_ranges"] = 0
    args = {"domain": pl.col("domain"), "tid": pl.col("tid"), "depth": pl.col("depth")}
    for batch in _batches(nvtx):
        counts["nvtx_ranges"] += batch.height
        pushpop = batch.filter(pl.col("style") == "PushPop")
        if pushpop.height:
            pushpop = pushpop.join(nvtx_tids, on=["pid", "tid", "domain"], maintain_order="left")
            yield _complete(pushpop, pl.col("name"), "nvtx", pl.col("pid"), pl.col("_tid"), args)
    if counts["nvtx_ranges"] == 0:
        return
    for ph, ts in (("b", _us("start_ns")), ("e", _us(pl.col("start_ns") + pl.col("duration_ns")))):
        for batch in _batches(nvtx):
            startend = batch.filter(pl.col("style") != "PushPop")
            if not startend.height:
                continue
            startend = _thousands(startend.join(nvtx_tids, on=["pid", "tid", "domain"], maintain_order="left"))
            cols = {
                "name": pl.col("name"),
                "cat": pl.lit("nvtx"),
                "ph": pl.lit(ph),
                "ts": ts,
                "pid": pl.col("pid"),
                "tid": pl.col("_tid"),
                "id": pl.format("nvtx{}", pl.col("range_id")),
            }
            if ph == "b":
                cols["args"] = pl.struct(**{"domain": pl.col("domain"), "tid": pl.col("tid")})
            yield startend.select(pl.struct(**cols).struct.json_encode().alias("e"))


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _complete(df: pl.DataFrame, name, cat, pid, tid, args: dict) -> pl.DataFrame:
    """Complete events (`ph: "X"`) of the rows of `df` (start_ns, duration_ns), one JSON object each."""
    cat = pl.lit(cat) if isinstance(cat, str) else cat
    return _thousands(df).select(
        pl.struct(
            name=name.cast(pl.String) if isinstance(name, pl.Expr) else pl.lit(name),
            cat=cat.cast(pl.String),
            ph=pl.lit("X"),
            ts=_us("start_ns"),
            dur=_us("duration_ns"),
            pid=pid.cast(pl.Int64),
            tid=tid.cast(pl.Int64),
            args=pl.struct(**args),
        )
        .struct.json_encode()
        .alias("e")
    )


def write(tables: dict, path: str | os.PathLike, source: str = "") -> dict:
    """Write the trace to `path`, a batch of events at a time; returns counts of what was written (events, and
    per kind) and `said`, those counts in words (what `nsysql trace` says of the file it wrote)."""
    counts: dict[str, int] = {}
    w = tables["window"].row(0, named=True)
    other = {
        "generator": f"nsysql {__version__}",
        "source": source,
        "window_start_ns": w["start_ns"],
        "window_end_ns": w["end_ns"],
        "time_unit": "ts and dur are microseconds on the export's clock (ns / 1000)",
    }
    n = 0
    with open(Path(path), "w", encoding="utf-8") as f:
        f.write('{"displayTimeUnit": "ms", "otherData": ' + json.dumps(other, ensure_ascii=False))
        f.write(', "traceEvents": [\n')
        first = True
        for frame in events(tables, counts):
            for i in range(0, frame.height, CHUNK):
                chunk = frame["e"].slice(i, CHUNK)
                if chunk.len() == 0:
                    continue
                f.write(("" if first else ",\n") + ",\n".join(chunk.to_list()))
                first = False
                n += chunk.len()
        f.write("\n]}\n")
    got = {
        "events": n,
        "gpu_ops": counts["gpu_ops"],
        "api_calls": counts["api_calls"],
        "nvtx_ranges": counts["nvtx_ranges"],
        "iterations": tables["iterations"].height if "iterations" in tables else 0,
        "gaps": tables["gaps"].height if "gaps" in tables else 0,
    }
    said = (
        f"{got['events']} events: {got['gpu_ops']} GPU ops, {got['api_calls']} CUDA API calls, "
        f"{got['nvtx_ranges']} NVTX ranges, {got['iterations']} iterations, {got['gaps']} idle gaps"
    )
    return {**got, "said": said}
