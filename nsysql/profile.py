"""The facade: `nsysql.load(path) -> Profile`, one method per analysis, each returning polars frames."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import polars as pl

from . import cache as _cache
from . import sandbox as _sandbox
from ._load import load  # noqa: F401 (nsysql.profile.load, as before)
from .analyses import api as _api
from .analyses import gaps as _gaps
from .analyses import info as _info
from .analyses import iterations as _iter
from .analyses import kernels as _kernels
from .analyses import kernels_by_range as _kbr
from .analyses import launches as _launches
from .analyses import metrics as _metrics
from .analyses import ops as _ops
from .analyses import overlap as _overlap
from .analyses import ranges as _ranges
from .analyses import summary as _summary
from .analyses._sql import facts as _facts
from .analyses._sql import user_frame as _user_frame
from .analyses.patterns import resolve_range
from .analyses.ranges import DEFAULT_ATTRIBUTION
from .errors import NsysqlError
from .loader import cursor as _cursor
from .memo import Answers, cached

if TYPE_CHECKING:
    import duckdb

    from .analyses.diff import Diff


def _default_settings() -> dict:
    from ._load import duckdb_config

    return duckdb_config(None, None)


def _head(whole: pl.DataFrame, top: int) -> pl.DataFrame:
    """The first `top` rows of a whole ranked table (ordered by total time, then name; pct is of the whole), so
    the one stored answer serves summary's top 10, `--top N` and everything."""
    if top < 0:
        raise NsysqlError(f"`top` must be 0 or more, not {top}", option="top")
    return whole.head(min(top, whole.height))  # polars takes no count beyond 64 bits: --top 10**30 is all rows


class Profile:
    """An nsys export loaded into DuckDB's canonical tables. `con` is the DuckDB connection, for your own SQL."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection | None,
        path: Path,
        cache_entry: Path | None = None,
        opener: Callable[[], duckdb.DuckDBPyConnection] | None = None,
        settings: Callable[[], dict] | None = None,
        parent: Profile | None = None,
    ):
        """`parent`: the Profile this one is a worker of (see worker()): its answers, lock and sql() database
        are shared, and the thread that first asks this one owns its connection."""
        self._con = con
        self._opener = opener
        self._lock = parent._lock if parent else threading.RLock()
        self._answers = parent._answers if parent else Answers(cache_entry)  # shared with its workers
        self.path = path
        self.cache_entry = cache_entry
        # the thread that uses _con itself; others get cursors of it (a worker's: the first to ask it)
        self._owner = None if parent else threading.get_ident()
        self._local = threading.local()
        self._cursors: list = []
        self._where: tuple[str, str] | None = None
        self._closed = False
        # where sql() runs: a database of its own that reads the canonical tables only (see nsysql.sandbox)
        self._user_own = parent is None
        self._user = (
            parent._user
            if parent
            else _sandbox.Sandbox(cache_entry, self._base, lambda: self._where, settings or _default_settings)
        )

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection over the canonical tables (opened, or built, on first use). A DuckDB connection
        runs one query at a time, so another thread gets a cursor of its own (made on its first use), and the
        same Profile can be asked from several threads at once."""
        base = self._base()
        if self._owner is None:  # a worker belongs to the thread that first asks it
            with self._lock:
                if self._owner is None:
                    self._owner = threading.get_ident()
        if threading.get_ident() == self._owner:
            return base
        cur = getattr(self._local, "cur", None)
        if cur is None:
            with self._lock:
                cur = self._local.cur = _cursor(base, self._where)
                self._cursors.append(cur)
        return cur

    @property
    def answers(self) -> Answers:
        """This Profile's answers (see nsysql.memo): remembered, and stored beside its cache entry."""
        return self._answers

    def check_open(self) -> None:
        """Raise NsysqlError if this Profile was closed."""
        if self._closed:
            raise NsysqlError(f"{self.path}: this Profile is closed; load the export again")

    def _base(self) -> duckdb.DuckDBPyConnection:
        """The connection itself, opened on first use, with the database and search path its cursors need
        (read now, before any query can keep the connection busy)."""
        self.check_open()
        if self._where is None:
            with self._lock:
                if self._con is None:
                    self._con = self._opener()
                if self._where is None:
                    self._where = self._con.execute(
                        "SELECT current_database(), current_setting('search_path')"
                    ).fetchall()[0]
        return self._con

    def close(self) -> None:
        """Close the DuckDB connection, once the cache entry being written from it (cold load) is in place.
        Afterwards the Profile answers nothing (NsysqlError)."""
        _cache.wait()
        with self._lock:
            for cur in self._cursors:
                cur.close()
            self._cursors.clear()
            if self._user_own:
                self._user.close()
            if self._con is not None:
                self._con.close()
                self._con = None
            self._closed = True

    def __enter__(self) -> Profile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def worker(self) -> Profile:
        """This Profile for another thread: the same answers, on a DuckDB cursor of its own (one connection runs
        one query at a time). `nsysql stats` asks its reports on workers at once; so can you."""
        return Profile(None, self.path, self.cache_entry, lambda: _cursor(self._base(), self._where), parent=self)

    def parallel(self, *calls: Callable[[Profile], object]) -> list:
        """Run `call(worker)` for each call on its own thread and worker Profile; the results in order (the
        first error is raised). DuckDB runs the queries side by side, and the Python between them overlaps."""
        if len(calls) <= 1:
            return [c(self) for c in calls]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(calls), thread_name_prefix="nsysql-ask") as pool:
            futures = [pool.submit(c, self.worker()) for c in calls]
            return [f.result() for f in futures]

    def __repr__(self) -> str:
        return f"<nsysql.Profile {self.path}>"

    @property
    def facts(self) -> dict[str, list[str]]:
        return _facts(self.con)

    @cached("info")
    def info(self) -> pl.DataFrame:
        return _info.info(self.con)

    @cached("kernels")
    def kernels(
        self,
        name: str = "demangled",
        top: int | None = None,
        by: str = "name",
        per: str | None = None,
        attribution: str = DEFAULT_ATTRIBUTION,
    ) -> pl.DataFrame:
        """Per kernel name (nsys's cuda_gpu_kern_sum, then category and tensor_cores); by="category": per
        category and tensor_cores, `category, tensor_cores, count, total_ns, pct, evidence` (tensor_cores measured by
        GPU metrics where the export has them: evidence `metrics`, else `name`); with per="iteration", the same
        per iteration of the loop (pct of the iteration's kernel time); per="range": per NVTX range, a kernel
        counting in every range open around its launch (`attribution` as in ranges)."""
        if per is not None:
            if per not in ("iteration", "range") or by != "category":
                raise NsysqlError(
                    f"per='iteration' or 'range' goes with by='category' only, not per={per!r}, by={by!r}"
                )
            if per == "range":
                return _kernels.categories_per_range(self.con, attribution)
            it = self._detect(None)
            return _kernels.categories_per_iteration(_iter.windows(self.con, it), it.pid)
        if top is not None:
            return _head(self.kernels(name=name, by=by), top)
        return _kernels.kernels(self.con, name=name, by=by)

    @cached("gpu_metrics")
    def gpu_metrics(
        self, by: str | None = None, range: str | None = None, attribution: str = DEFAULT_ATTRIBUTION
    ) -> pl.DataFrame:
        """GPU metrics sampled by `nsys profile --gpu-metrics-devices=...`: per device and metric `device_id,
        metric, unit, samples, mean, min, p50, p90, max, note` over the capture (note: counters whose values do
        not fit their unit, see nsysql.analyses.metrics); by="iteration" (the loop, or `range`) or by="range"
        (per NVTX range): the time-weighted mean over each instance's GPU-projected window."""
        if by == "iteration":
            it = self._detect(range)
            return _metrics.gpu_metrics(self.con, by=by, windows=_iter.windows(self.con, it), pid=it.pid)
        return _metrics.gpu_metrics(self.con, by=by, attribution=attribution)

    @cached("api")
    def api(self, top: int | None = None) -> pl.DataFrame:
        """CUDA API calls by function (as `nsys stats -r cuda_api_sum`): calls, time inside them, % of API time."""
        if top is not None:
            return _head(self.api(), top)
        return _api.api(self.con)

    @cached("launches")
    def launches(self, by: str = "launch") -> pl.DataFrame:
        """Launch latency (as `nsys stats -r cuda_kern_exec_sum`): per pid, tid, device, launching API and kernel,
        `count, queue_count` and `{total,api,queue,kernel}_{avg,med,min,max,stddev}_ns`; by="kernel": per kernel."""
        return _launches.launches(self.con, by=by)

    @cached("ranges")
    def ranges(self, attribution: str = DEFAULT_ATTRIBUTION, group_ops: bool | None = None) -> pl.DataFrame:
        """NVTX ranges per name (nsys's nvtx_sum and nvtx_gpu_proj_sum); `group_ops`: PyTorch emit_nvtx names
        without their per-call arguments (`aten::addmm, seq = 5, op_id = 9, ...` -> `aten::addmm`); by default
        (None) grouped under the process rule, per full name under the thread rule (as `nsys stats`)."""
        return _ranges.ranges(self.con, attribution=attribution, group_ops=group_ops)

    @cached("kernels_by_range")
    def kernels_by_range(
        self,
        range: str | None = None,
        innermost: bool = False,
        attribution: str = DEFAULT_ATTRIBUTION,
        group_ops: bool | None = None,
    ) -> pl.DataFrame:
        return _kbr.kernels_by_range(
            self.con, range=range, innermost=innermost, attribution=attribution, group_ops=group_ops
        )

    @cached("ops")
    def ops(self, shapes: bool = False) -> pl.DataFrame:
        """PyTorch operators (emit_nvtx ranges), one row per name without arguments (per name and `sizes` when
        `shapes`): `op, calls, cpu_ns, fwd_gpu_ns, bwd_gpu_ns, kernels, top_kernel`; each kernel counted once,
        on the outermost operator it was launched in, or as backward time of the op whose node launched it."""
        return _ops.ops(self.con, shapes=shapes)

    @cached("summary")
    def summary(self, attribution: str = DEFAULT_ATTRIBUTION, top: int = 10) -> dict[str, pl.DataFrame]:
        # through the (stored) answers of iterations() and gaps(), so a report that asks them next reuses them
        def loop(p):
            try:
                return p.iterations(), p.iteration_stats()
            except NsysqlError as e:  # no loop: the summary says why
                return e

        def gaps(p):
            try:
                return p.gaps()
            except NsysqlError as e:
                return e

        def work(p):
            try:
                return p._headroom_work()
            except NsysqlError:  # no loop: no headroom
                return None

        its, g, k, r, read, w = self.parallel(
            loop,
            gaps,
            lambda p: p.kernels(top=top),
            lambda p: p.ranges(attribution=attribution),
            lambda p: _summary.tables(p.con),
            work,
        )
        return _summary.summary(self.con, loop=its, gaps_df=g, kernels_df=k, ranges_df=r, read=read, top=top, work=w)

    @cached("iterations")
    def iterations(self, range: str | None = None, skip: int | None = None) -> pl.DataFrame:
        """One row per iteration of the loop (see nsysql.analyses.iterations for the rules)."""
        return _iter.iterations(self.con, range=range, skip=skip, it=self._detect(range))

    @cached("overlap")
    def overlap(self, by: str = "device", range: str | None = None) -> pl.DataFrame:
        """Communication hidden or exposed: per device with communication kernels, `device_id, comm_ns,
        overlapped_ns, exposed_ns, compute_ns`; by="iteration": the same per iteration of the loop (`range`, as
        in iterations), on the loop's device."""
        if by not in _overlap.GROUPINGS:
            raise NsysqlError(f"`by` must be one of {', '.join(_overlap.GROUPINGS)}, not {by!r}", option="by")
        if by == "iteration":
            return _overlap.by_iteration(self.iterations(range=range), self._detect(range).device_id)
        return _overlap.overlap(self.con)

    def _detect(self, range: str | None) -> _iter.IterationRange:
        """The iteration range for `range`, found once per Profile and its workers (iterations and
        iteration_stats both need it; finding it takes a few queries); a worker asking it meanwhile waits."""
        return self._answers.once(("detect", range), lambda: _iter.detect(self.con, range))

    @cached("iteration_stats")
    def iteration_stats(self, range: str | None = None, skip: int | None = None) -> pl.DataFrame:
        """Steady-state summary of iteration time, the outlier pattern, and which range was chosen and why."""
        it = self._detect(range)
        return _iter.stats(self.iterations(range=range, skip=skip), it)  # the (stored) iterations frame

    @cached("gaps", normalize={"min_ns": _gaps.parse_duration})
    def gaps(
        self,
        range: str | None = None,
        min_ns: int | str = _gaps.DEFAULT_MIN_NS,
        by: str | None = None,
        include_warmup: bool = False,
    ) -> pl.DataFrame:
        """GPU idle gaps with their causes; `by="cause"` for idle time per cause."""
        if by not in (None, "cause"):
            raise NsysqlError(f"gaps can be grouped by 'cause' only, not {by!r}")
        # the inputs first (stored answers, or found once per Profile and its workers), then the analyses
        its = self._gap_spans(range)
        if by == "cause":
            # from the gaps and iteration spans answers (stored by an earlier summary or gaps), so a warm run
            # opens no tables unless the span must be measured (no iterations, or --include-warmup)
            g = self.gaps(range=range, min_ns=min_ns)
            con = None if _gaps.steady_only(g, include_warmup) else self.con
            return _gaps.by_cause(con, g, range=range, include_warmup=include_warmup, its=its)
        return _gaps.with_iterations(_gaps.find(self.con, range=range, min_ns=min_ns), its)  # min_ns in ns

    @cached("gap_activity", normalize={"min_ns": _gaps.parse_duration})
    def gap_activity(
        self,
        range: str | None = None,
        min_ns: int | str = _gaps.DEFAULT_MIN_NS,
        by: str | None = None,
        include_warmup: bool = False,
        top: int | None = None,
    ) -> pl.DataFrame:
        """What every other thread and process did during each gap of `gaps()` (NVTX ranges, innermost per
        thread; OS runtime calls; CUDA API calls), ranked by overlap, at most `top` per gap; `by="cause"`: per
        cause group of `gaps(by="cause")`. Rules in queries/v1/analyses/gap_activity.sql."""
        if by not in (None, "cause"):
            raise NsysqlError(f"gaps can be grouped by 'cause' only, not {by!r}")
        g = self.gaps(range=range, min_ns=min_ns)
        if by is None:
            return _gaps.explain(self.con, g, top=top)
        return _gaps.explain_by_cause(self.con, g, include_warmup=include_warmup, top=top)

    def findings(self) -> pl.DataFrame:
        """The summary's findings: `finding, headroom_ms, headroom_pct, pool, additive, evidence, needs,
        headroom_basis`, the one that would give back most time per steady-state iteration first (rules in
        nsysql.analyses.findings, headroom in nsysql.analyses.headroom)."""
        return self.summary()["findings"]

    def _gap_spans(self, range: str | None) -> pl.DataFrame | None:
        """The iterations gaps are indexed by (and their steady-state span counted over): the spans of the
        iterations of `range`, else of the detected loop; None without a loop. Spans, not the iterations answer:
        the same iteration, start_ns, end_ns, wall_ns and warmup, without the GPU work per iteration."""
        for pattern in [range, None] if range else [None]:
            try:
                return self._spans(range=pattern)
            except NsysqlError:
                continue
        return None

    @cached("iteration_spans")
    def _spans(self, range: str | None = None, skip: int | None = None) -> pl.DataFrame:
        it = self._detect(range)
        return _iter.spans(self.con, skip=skip, it=it)

    def diff(self, other: "Profile") -> Diff:
        """This profile (BASE) against `other` (NEW): verdict, iteration time, idle by cause, ranges, kernels,
        per steady-state iteration (rules in nsysql.analyses.diff); `.to_frames()` gives the sections as frames."""
        from .analyses import diff as _diff

        b, n = self._diff_side(), other._diff_side()
        if _diff.needs_totals(b, n):
            b, n = (
                replace(s, totals=_diff.totals(p.kernels(), _diff.family_totals(p.con)))
                for s, p in ((b, self), (n, other))
            )
        return _diff.diff(b, n, base_label=self.path.name, new_label=other.path.name)

    def _diff_side(self):
        """What diff reads of this profile, from its (stored) answers."""
        from .analyses import diff as _diff

        gpus = self._gpus()
        try:
            its, st, parts = self.iterations(), self.iteration_stats(), self._breakdown()
        except NsysqlError as e:
            return _diff.Side(gpus, str(e))
        if not gpus.height:
            return _diff.side(gpus, its, st, parts["kernels"], parts["ranges"], None)
        return _diff.side(gpus, its, st, parts["kernels"], parts["ranges"], self.gaps(), self.gap_activity())

    @cached("nccl_ranges")
    def _nccl_ranges(self) -> pl.DataFrame:
        """NCCL range time: instances and total time of the NCCL NVTX ranges (for nsysql.many)."""
        from .analyses import ranks as _ranks

        return _ranks.nccl(self.con)

    @cached("gpus")
    def _gpus(self) -> pl.DataFrame:
        return _summary.gpus(self.con)

    @cached("headroom_work")
    def _headroom_work(self, range: str | None = None) -> pl.DataFrame:
        """Per iteration of the loop: the GPU work findings' headroom reads (nsysql.analyses.headroom.work)."""
        from .analyses import headroom as _headroom

        it = self._detect(range)
        return _headroom.work(_iter.windows(self.con, it), it.pid)

    @cached("iteration_breakdown")
    def _breakdown(self, range: str | None = None) -> dict[str, pl.DataFrame]:
        return _iter.breakdown(self.con, self._detect(range))

    def timeline(
        self, bins: int = 1500, start_ns: int | None = None, end_ns: int | None = None, devices: list[int] | None = None
    ) -> pl.DataFrame:
        """GPU busy time per device (every one, or those in `devices`) in `bins` equal bins of its active span (or
        of [start_ns, end_ns))."""
        from .analyses.timeline import timeline

        return timeline(self.con, bins=bins, start_ns=start_ns, end_ns=end_ns, devices=devices)

    def trace(self, window: str | None = None, iterations: str | None = None, lazy: bool = False) -> dict:
        """The rows of a timeline (nsysql.analyses.trace): GPU ops, CUDA API calls, NVTX ranges, names, and the
        iterations and idle gaps, within `window` ("START:END", durations from the profile's start) or from the
        start of iteration A to the end of B (`iterations="A:B"`); the whole profile by default. DataFrames; with
        `lazy`, the GPU ops, API calls and NVTX ranges are read a batch at a time when written (nsysql.perfetto)."""
        from .analyses import trace as _trace

        if window and iterations:
            raise NsysqlError("give `window` or `iterations`, not both", option=("window", "iterations"))
        start, end = _trace.span(self.con)
        try:
            its = self.iterations()
        except NsysqlError as e:
            if iterations:
                raise NsysqlError(f"`iterations`: {e}", option="iterations") from None
            its = None
        if iterations:
            t0, t1 = _trace.iterations_window(its, *_trace.parse_iterations(iterations))
        elif window:
            t0, t1 = _trace.parse_window(window, start, end)
        else:
            t0, t1 = start, end
        try:
            gaps = self.gaps()
        except NsysqlError:  # no GPU work: no gaps to show
            gaps = None
        got = _trace.rows(self.con, t0, t1, its, gaps, lazy=lazy)
        if window:
            _trace.check_window(got, window, start, end, its)
        return got

    def metrics_timeline(self, start_ns: int, end_ns: int, bins: int = 1500) -> pl.DataFrame:
        """SMs Active and Tensor Active (GPU metrics) per device in `bins` equal bins of [start_ns, end_ns): the
        strip the report draws under the GPU timeline; empty when the export has no GPU metrics."""
        return _metrics.timeline(self.con, start_ns, end_ns, bins=bins)

    def export(self, to: str | os.PathLike, format: str = "parquet") -> pl.DataFrame:
        """Write the canonical tables (parquet or csv) and a README.md describing their columns into `to`."""
        from .export import export

        return export(self.con, Path(to), format=format)

    def resolve_range(self, pattern: str) -> list[str]:
        return resolve_range(self.con, pattern)[0]

    def interrupt(self) -> None:
        """Stop the sql() queries of this Profile (and of its workers) that other threads are running: each raises
        NsysqlError. For a front end's Ctrl-C, which Python gives only to the main thread, and only between two
        bytecodes: never while DuckDB runs a query there. The Profile stays usable."""
        self._user.interrupt()

    def sql(self, query: str) -> pl.DataFrame:
        """Run your own read-only SQL (SELECT, EXPLAIN of a SELECT) over the canonical tables (see
        queries/v1/canonical/), in a DuckDB database of its own that can write nothing and read no file, URL or
        extension (nsysql.sandbox). For tables and writes of your own, use `self.con`."""
        if self._closed:
            raise NsysqlError(f"{self.path}: this Profile is closed; load the export again")
        try:
            return _user_frame(self._user.cursor(), query)
        except NsysqlError as e:
            raise NsysqlError(f"{self.path}: {e}") from None
