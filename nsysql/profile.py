"""The facade: `nsysql.load(path) -> Profile`, one method per analysis, each returning polars frames.

Each analysis method asks the engine for the declared analysis of its name (nsysql.analyses.catalog) in one
line; the engine (nsysql.engine) owns the connection, serves answers from memory or the store, and runs the
pieces of a request side by side. Nothing here composes answers.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import polars as pl

from .analyses import catalog as _catalog  # noqa: F401 (declares every analysis in the engine's registry)
from .analyses._sql import user_frame as _user_frame
from .analyses.findings import Thresholds
from .analyses.gaps import DEFAULT_MIN_NS
from .analyses.iterations import OUTLIER_SIGMAS
from .analyses.ranges import DEFAULT_ATTRIBUTION
from .analyses.timeline import DEFAULT_BINS
from .engine import REGISTRY, REQUIRED, Engine
from .errors import NsysqlError
from .store.answers import Answers

if TYPE_CHECKING:
    import duckdb

    from .analyses.diff import Diff


class Profile:
    """An nsys export loaded into DuckDB's canonical tables. `con` is the DuckDB connection, for your own SQL."""

    def __getattr__(self, name: str):
        """`p.<analysis>(**params)` for an analysis that declares a command (Analysis.command), or what one shows
        (Analysis.view), and has no method written here: it asks the engine in one line, as the written methods
        do, its doc the declaration's."""
        decl = REGISTRY.get(name)
        if decl is None or (decl.command is None and not decl.view) or "_engine" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

        def method(**params):
            return self._engine.run(name, **params)

        method.__name__ = method.__qualname__ = name
        method.__doc__ = decl.doc
        method.__signature__ = _signature(decl)
        return method

    def __dir__(self):
        return sorted({*super().__dir__(), *(n for n, a in REGISTRY.items() if a.command or a.view)})

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
        self._engine = Engine(con, path, cache_entry, opener, settings, parent._engine if parent else None)
        self.path = path

    @classmethod
    def _over(cls, engine: Engine) -> Profile:
        """The Profile of an engine (a worker's)."""
        p = cls.__new__(cls)
        p._engine, p.path = engine, engine.path
        return p

    @property
    def cache_entry(self) -> Path | None:
        """The store entry of the export's canonical tables (None: in memory), written (Engine.entry)."""
        return self._engine.entry()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection over the canonical tables (opened, or built, on first use). A DuckDB connection
        runs one query at a time, so another thread gets a cursor of its own (made on its first use), and the
        same Profile can be asked from several threads at once."""
        return self._engine.con

    @property
    def _con(self) -> duckdb.DuckDBPyConnection | None:
        """The connection if it was opened, else None (a warm answer from the store opens none)."""
        return self._engine._con

    @property
    def answers(self) -> Answers:
        """This Profile's answers (see nsysql.store.answers): remembered, and stored beside its cache entry."""
        return self._engine.answers

    def check_open(self) -> None:
        """Raise NsysqlError if this Profile was closed."""
        self._engine.check_open()

    def close(self) -> None:
        """Close the DuckDB connection, once the cache entry being written from it (cold load) is in place.
        Afterwards the Profile answers nothing (NsysqlError)."""
        self._engine.close()

    def __enter__(self) -> Profile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def worker(self) -> Profile:
        """This Profile for another thread: the same answers, on a DuckDB cursor of its own (one connection runs
        one query at a time). `nsysql stats` asks its reports on workers at once; so can you."""
        return Profile._over(self._engine.worker())

    def parallel(self, *calls: Callable[[Profile], object]) -> list:
        """Run `call(worker)` for each call on its own thread and worker Profile; the results in order (the
        first error is raised). DuckDB runs the queries side by side, and the Python between them overlaps."""
        if len(calls) <= 1:
            return [c(self) for c in calls]
        return self._engine.parallel(*(lambda e, c=c: c(Profile._over(e)) for c in calls))

    def plan(self, *names: str) -> None:
        """Build at once what the analyses `names` may read, before they are asked (side by side, say): a cold
        load reads and builds them in one pass rather than one pass per answer."""
        self._engine.plan_request(*names)

    def each(self, *asked: tuple[str, dict], **shared) -> list:
        """The answer of each `(analysis, params)` of `asked`, computed side by side after one pass that builds
        what they read, each given those of `shared` its analysis takes; an analysis that does not apply gives
        its NsysqlError as its answer (`nsysql stats`' reports)."""
        return self._engine.each(*asked, **shared)

    def __repr__(self) -> str:
        return f"<nsysql.Profile {self.path}>"

    @property
    def facts(self) -> dict[str, list[str]]:
        """Facts about the profile as a whole: key -> its values (a key may repeat, e.g. `missing`)."""
        return self._engine.run("facts")

    def info(self) -> pl.DataFrame:
        """What the export holds and lacks, and which commands apply to it (and why not, as each says it)."""
        return self._engine.run("info")

    def why_not(self, analysis: str) -> str:
        """Why the analysis `analysis` (kernels, api, ...) does not apply to this export, in one line, as `info`
        says it of its command and the command says it (its own refusal, or the tables it requires that hold no
        rows, and what would have recorded them); '' where it does."""
        return self._engine.run("why_not", analysis=analysis)

    def shown(self, analysis: str, **params):
        """`p.<analysis>(**params)` as its command shows it: where the answer is empty because the analysis does
        not apply to this export (p.why_not says so), NsysqlError with that line instead of an empty frame."""
        return self._engine.shown(analysis, **params)

    def cpu_note(self, by: str | None = "thread") -> str:
        """The line under `cpu(by="thread")` or `by="process"` answered from scheduling events alone (no CPU
        samples: which functions ran is unknown), naming the switch that records samples; '' otherwise. `by`
        None: under `cpu()` asked without a `by`, which answers per thread there, and the line says why."""
        return self._engine.run("cpu_note", by=by)

    def kernels(
        self,
        name: str = "demangled",
        top: int | None = None,
        by: str = "name",
        per: str | None = None,
        attribution: str = DEFAULT_ATTRIBUTION,
        range: str | None = None,
    ) -> pl.DataFrame:
        """Per kernel name (nsys's cuda_gpu_kern_sum, then category and tensor_cores); by="category": per
        category and tensor_cores, `category, tensor_cores, count, total_ns, pct, evidence` (tensor_cores measured by
        GPU metrics where the export has them: evidence `metrics`, else `name`); with per="iteration", the same
        per iteration of the loop (pct of the iteration's kernel time); per="range": per NVTX range, a kernel
        counting in every range open around its launch (`attribution` as in ranges). `range`: with per="iteration",
        the loop, as in iterations (None: detected)."""
        return self._engine.run("kernels", name=name, top=top, by=by, per=per, attribution=attribution, range=range)

    def gpu_metrics(
        self, by: str | None = None, range: str | None = None, attribution: str = DEFAULT_ATTRIBUTION
    ) -> pl.DataFrame:
        """GPU metrics sampled by `nsys profile --gpu-metrics-devices=...`: per device and metric `device_id,
        metric, unit, samples, mean, min, p50, p90, max, note` over the capture (note: counters whose values do
        not fit their unit, see nsysql.analyses.metrics); by="iteration" (the loop, or `range`) or by="range"
        (per NVTX range, those `range` selects): the time-weighted mean over each instance's GPU-projected window."""
        return self._engine.run("gpu_metrics", by=by, range=range, attribution=attribution)

    def api(self, top: int | None = None) -> pl.DataFrame:
        """CUDA API calls by function (as `nsys stats -r cuda_api_sum`): calls, time inside them, % of API time."""
        return self._engine.run("api", top=top)

    def launches(self, by: str = "launch") -> pl.DataFrame:
        """Launch latency (as `nsys stats -r cuda_kern_exec_sum`): per pid, tid, device, launching API and kernel,
        `count, queue_count` and `{total,api,queue,kernel}_{avg,med,min,max,stddev}_ns`; by="kernel": per kernel."""
        return self._engine.run("launches", by=by)

    def ranges(
        self, attribution: str = DEFAULT_ATTRIBUTION, group_ops: bool | None = None, families: bool = False
    ) -> pl.DataFrame:
        """NVTX ranges per name (nsys's nvtx_sum and nvtx_gpu_proj_sum columns; the GPU columns by nsys's rule only
        with attribution="thread": "process" also credits the ops other threads of the process launched with no
        range open, see the README's `--attribution`); `group_ops`: PyTorch emit_nvtx names
        without their per-call arguments (`aten::addmm, seq = 5, op_id = 9, ...` -> `aten::addmm`); by default
        (None) grouped under the process rule, per full name under the thread rule (as `nsys stats`).
        `families`: numbered names (`Batch0..Batch59`) as one row, `Batch*`, with `names`, how many it folds."""
        return self._engine.run("ranges", attribution=attribution, group_ops=group_ops, families=families)

    def kernels_by_range(
        self,
        range: str | None = None,
        innermost: bool = False,
        attribution: str = DEFAULT_ATTRIBUTION,
        group_ops: bool | None = None,
    ) -> pl.DataFrame:
        """Kernels per NVTX range (as `nsys stats -r nvtx_kern_sum` with attribution="thread"; "process", the
        default, also credits a range with the kernels other threads of its process launched with no range open):
        per (range, kernel), range instances, kernel count and duration stats; `innermost`: each kernel only in its
        deepest selected range."""
        return self._engine.run(
            "kernels_by_range", range=range, innermost=innermost, attribution=attribution, group_ops=group_ops
        )

    def ops(self, shapes: bool = False) -> pl.DataFrame:
        """PyTorch operators (emit_nvtx ranges), one row per name without arguments (per name and `sizes` when
        `shapes`): `op, calls, cpu_ns, fwd_gpu_ns, bwd_gpu_ns, kernels, top_kernel`; each kernel counted once,
        on the outermost operator it was launched in, or as backward time of the op whose node launched it."""
        return self._engine.run("ops", shapes=shapes)

    def summary(
        self,
        attribution: str = DEFAULT_ATTRIBUTION,
        top: int = 10,
        thresholds: Thresholds = Thresholds(),
        families: bool = True,
        range: str | None = None,
    ) -> dict[str, pl.DataFrame]:
        """One screen about the profile: facts, GPU busy time, iterations, idle causes, findings, top kernels
        and ranges, memory ops (nsysql.analyses.summary), as frames by section (`facts`, `gpus`, `findings`,
        `idle by cause` where GPU work was traced, `kernels`, `ranges`, `memory`); `thresholds`: the findings'
        limits (nsysql.analyses.findings.Thresholds, e.g. `Thresholds(host_share=0.4)`); `families`: numbered
        ranges (`Batch0..Batch59`) as one row, `Batch*` (False: one row per name); `range`: the loop, as in
        iterations (None: detected)."""
        return self._engine.run(
            "summary", attribution=attribution, top=top, thresholds=thresholds, families=families, range=range
        )

    def iterations(
        self, range: str | None = None, skip: int | None = None, outlier_sigmas: float = OUTLIER_SIGMAS
    ) -> pl.DataFrame:
        """One row per iteration of the loop (see nsysql.analyses.iterations for the rules): `skip` warm-up
        iterations (None: found from the times); an outlier is a steady-state step slower than median +
        max(`outlier_sigmas` x 1.4826 x MAD, 25% of the median, 50 us)."""
        return self._engine.run("iterations", range=range, skip=skip, outlier_sigmas=outlier_sigmas)

    def iteration_note(
        self, range: str | None = None, skip: int | None = None, outlier_sigmas: float = OUTLIER_SIGMAS
    ) -> dict[str, str | None]:
        """What to say under the iterations (parameters as in iterations): `range` (the loop's range and why),
        `steady` (the steady state in one sentence), `outliers` (their pattern, or None)."""
        return self._engine.run("iteration_note", range=range, skip=skip, outlier_sigmas=outlier_sigmas)

    def overlap(self, by: str = "device", range: str | None = None) -> pl.DataFrame:
        """Communication hidden or exposed: per device with communication kernels, `device_id, comm_ns,
        overlapped_ns, exposed_ns, compute_ns`; by="iteration": the same per iteration of the loop (`range`, as
        in iterations), on the loop's device."""
        return self._engine.run("overlap", by=by, range=range)

    def collective_findings(self, slow_ratio: float = 0.5) -> pl.DataFrame:
        """Collectives slower than `slow_ratio` x the median bus bandwidth of their kind and size: one row with
        the calls flagged, their GPU time beyond the median (`extra_ms`), the evidence (None when none is) and
        the rule."""
        return self._engine.run("collective_findings", slow_ratio=slow_ratio)

    def iteration_stats(
        self, range: str | None = None, skip: int | None = None, outlier_sigmas: float = OUTLIER_SIGMAS
    ) -> pl.DataFrame:
        """Steady-state summary of iteration time, the outlier pattern, and which range was chosen and why
        (parameters as in iterations)."""
        return self._engine.run("iteration_stats", range=range, skip=skip, outlier_sigmas=outlier_sigmas)

    def gaps(
        self,
        range: str | None = None,
        min_ns: int | str = DEFAULT_MIN_NS,
        by: str | None = None,
        include_warmup: bool = False,
        loop: str | None = None,
    ) -> pl.DataFrame:
        """GPU idle gaps with their causes; `by="cause"` for idle time per cause. `range`: only the idle time
        inside instances of those ranges; `loop`: the iteration range the gaps are indexed by, as in iterations
        (None: `range`, else the loop detected)."""
        return self._engine.run("gaps", range=range, min_ns=min_ns, by=by, include_warmup=include_warmup, loop=loop)

    def gap_activity(
        self,
        range: str | None = None,
        min_ns: int | str = DEFAULT_MIN_NS,
        by: str | None = None,
        include_warmup: bool = False,
        top: int | None = None,
        loop: str | None = None,
    ) -> pl.DataFrame:
        """What every other thread and process did during each gap of `gaps()` (NVTX ranges, innermost per
        thread; OS runtime calls; CUDA API calls), ranked by overlap, at most `top` per gap; `by="cause"`: per
        cause group of `gaps(by="cause")` (`loop` as in gaps). Rules in queries/v1/analyses/gap_activity.sql."""
        return self._engine.run(
            "gap_activity", range=range, min_ns=min_ns, by=by, include_warmup=include_warmup, top=top, loop=loop
        )

    def findings(self, thresholds: Thresholds = Thresholds()) -> pl.DataFrame:
        """The summary's findings: `finding, headroom_ms, headroom_pct, pool, additive, evidence, needs,
        headroom_basis`, the one that would give back most time per steady-state iteration first (rules in
        nsysql.analyses.findings, headroom in nsysql.analyses.headroom); `thresholds` as in summary."""
        return self._engine.run("findings", thresholds=thresholds)

    def diff(self, other: Profile, fail_above: float | None = None, range: str | None = None) -> Diff:
        """This profile (BASE) against `other` (NEW): verdict, iteration time, idle by cause, ranges, kernels,
        per steady-state iteration (rules in nsysql.analyses.diff); `.to_frames()` gives the sections as frames.
        `fail_above`: a limit, in %, on how much slower NEW's mean steady-state iteration may be (`.over_limit`
        says why it is broken, `.exit_status` is then 1). `range`: the loop in both, as in iterations (None: each
        side's detected)."""
        return self._engine.run("diff", other=other._engine, fail_above=fail_above, range=range)

    def report(self, top: int = 10, range: str | None = None) -> dict[str, pl.DataFrame]:
        """Everything the HTML report (`nsysql report`) shows, as sections (nsysql.analyses.report): summary's
        (`top` rows of kernels), the fact cards, iterations, the GPU timeline, kernel categories, idle time and
        the work elsewhere meanwhile, ranges, kernels by range, PyTorch operators; `notes` says why a section
        that does not apply is absent, and the sentences under the charts; `range`: the loop, as in iterations
        (None: detected)."""
        return self._engine.run("report", top=top, range=range)

    def snippet(self, top: int = 10, range: str | None = None) -> dict[str, pl.DataFrame]:
        """What the PR snippet (`nsysql report -f markdown`) shows: summary's sections (`top` rows of kernels), the
        top PyTorch operators by GPU time (`top_ops`), the GPUs' busy share (`notes`); `range`: the loop, as in
        iterations (None: detected)."""
        return self._engine.run("snippet", top=top, range=range)

    def report_diff(self, other: Profile, range: str | None = None):
        """What the comparison report (`nsysql report NEW --baseline BASE`, this profile BASE) shows: `.diff`,
        each side's steady-state step times, and NEW's `report()` as `.new`; `range`: the loop in both, as in
        iterations (None: each side's detected)."""
        return self._engine.run("report_diff", other=other._engine, range=range)

    def _rank_tables(self, range: str | None = None) -> dict[str, pl.DataFrame]:
        """One rank's frames for the cross-rank answers of nsysql.many (nsysql.analyses.ranks.rank_tables), its
        loop `range` (None: detected)."""
        return self._engine.run("rank_tables", range=range)

    def timeline(
        self,
        bins: int = DEFAULT_BINS,
        start_ns: int | None = None,
        end_ns: int | None = None,
        devices: list[int] | None = None,
    ) -> pl.DataFrame:
        """GPU busy time per device (every one, or those in `devices`) in `bins` equal bins of its active span (or
        of [start_ns, end_ns)): `device_id, bin, start_ns, end_ns, busy_ns, busy_pct`."""
        return self._engine.run("timeline", bins=bins, start_ns=start_ns, end_ns=end_ns, devices=devices)

    def trace(
        self, window: str | None = None, iterations: str | None = None, lazy: bool = False, range: str | None = None
    ) -> dict:
        """The rows of a timeline (nsysql.analyses.trace): GPU ops, CUDA API calls, NVTX ranges, names, and the
        iterations and idle gaps, within `window` ("START:END", durations from the profile's start) or from the
        start of iteration A to the end of B (`iterations="A:B"`); the whole profile by default. DataFrames; with
        `lazy`, the GPU ops, API calls and NVTX ranges are read a batch at a time when written (nsysql.perfetto).
        `range`: the loop of the iterations, as in iterations (None: detected)."""
        return self._engine.run("trace", window=window, iterations=iterations, lazy=lazy, range=range)

    def metrics_timeline(self, start_ns: int, end_ns: int, bins: int = DEFAULT_BINS) -> pl.DataFrame:
        """SMs Active and Tensor Active (GPU metrics) per device in `bins` equal bins of [start_ns, end_ns): the
        strip the report draws under the GPU timeline; empty when the export has no GPU metrics."""
        return self._engine.run("metrics_timeline", start_ns=start_ns, end_ns=end_ns, bins=bins)

    def export(self, to: str | os.PathLike, format: str = "parquet") -> pl.DataFrame:
        """Write the canonical tables (parquet or csv) and a README.md describing their columns into `to`; one row
        per table written: `table, rows, file`."""
        return self._engine.run("export", to=to, format=format)

    def resolve_range(self, pattern: str) -> list[str]:
        """The range names `pattern` selects: exact name, else a numbered family, else a prefix, else RE2."""
        return self._engine.run("resolve_range", pattern=pattern)

    def interrupt(self) -> None:
        """Stop the sql() queries of this Profile (and of its workers) that other threads are running: each raises
        NsysqlError. For a front end's Ctrl-C, which Python gives only to the main thread, and only between two
        bytecodes: never while DuckDB runs a query there. The Profile stays usable."""
        self._engine.sandbox.interrupt()

    def sql(self, query: str) -> pl.DataFrame:
        """Run your own read-only SQL (SELECT, EXPLAIN of a SELECT) over the canonical tables (see
        queries/v1/canonical/), in a DuckDB database of its own that can write nothing and read no file, URL or
        extension (nsysql.sandbox). For tables and writes of your own, use `self.con`."""
        self._engine.check_open()
        try:
            return _user_frame(self._engine.sandbox.cursor(), query)
        except NsysqlError as e:
            raise NsysqlError(f"{self.path}: {e}") from None


def _signature(decl) -> inspect.Signature:
    """A declared analysis' parameters as a keyword-only signature (what help() and editors show)."""
    kw = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [
            inspect.Parameter(p.name, kw, **({} if p.default is REQUIRED else {"default": p.default}))
            for p in decl.params
        ]
    )
