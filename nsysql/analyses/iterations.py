"""Per-iteration breakdown of a training or inference loop, with warm-up and outlier flags.

Which range is the iteration (`detect`):
- With a pattern (`--range`), the ranges it selects (a numbered family like Batch0..Batch59 is one range), on
  the thread that has most of them, at the depth where that thread has most of them (the outermost on a tie):
  one depth, so the sentence counts exactly the rows of the table. Taken as given, GPU work or not.
- Without one, range families (names with a counting trailing number stripped, see iteration_candidates.sql)
  that repeat at least MIN_REPEATS times at one depth on one thread are tried in this order: the main thread
  of each process with GPU work (process_roles), busiest process first (every thread when the profile has no
  GPU work), then the outermost depth, then the most instances, the earliest on a tie. The first family that
  passes every test below is the loop; at most MAX_CANDIDATES are tried. A family whose ranges have no name
  (NULL, empty or blank text) is passed over untested: families are told apart by name, so one without a name
  is a guess; `why` (or the refusal, where it came first) says so, and --range '' takes it. When none passes,
  there is no loop: `detect` says so, names the first candidate tried and the test it failed, and suggests
  --range.
  The tests, on the iteration windows the family would give (iteration_evidence.sql):
  1. work: where the process launched GPU work, at least MIN_WORK_SHARE of the iterations launch some: kernels
     or CUDA graphs when the process launched any, else any GPU op. A loop that copies 10 parameters to the GPU
     before a forward pass is not the work of the profile.
  2. resemblance: consecutive iterations hold mostly the same things: the median over consecutive pairs of the
     Jaccard similarity of their sets of kernel names and child range names is at least MIN_RESEMBLANCE. The
     steps of a loop run the same kernels; the numbered layers of one forward pass do not.
  3. coverage: the iterations launch at least MIN_COVERAGE of the process's GPU work time (of the thread's
     NVTX extent when the profile has no GPU work): a loop of 16 copy layers holding 0.3% of the kernel time
     is not the loop of the profile.
- The range is a *wrapper* when its instances enclose child ranges: each instance is one iteration. Otherwise
  it is a *delimiter* (DLProf's key-node rule): an iteration runs from the start of one instance to the start
  of the next, e.g. `batch_to_device` in a loop of sibling `batch_to_device`, `forward`, `backward`,
  `optimizer_step` ranges; the last one over the siblings that follow it as they followed the one before
  (iteration_windows.sql).
- Without GPU work in the process (an NVTX-only profile), the GPU columns of the iterations are null; the CPU
  time per child range is there as always.

Flags (`flag`):
- `warmup`: the first `skip` iterations. By default (skip=None) the first iteration, extended over the
  iterations right after it that are still outliers by the rule below, up to max(2, 10% of the iterations)
  in all (one-off initialisation often spills into the second step: optimizer state, allocator growth). An
  explicit `skip` is taken as given.
- `outlier`: a steady-state iteration slower than median + max(k x 1.4826 x MAD, 25% of the median, 50 us),
  k = OUTLIER_SIGMAS = 3, where MAD is the median absolute deviation of steady-state step times (1.4826 x MAD
  estimates the standard deviation of normal noise; the 25% floor keeps very regular loops from flagging
  jitter; the 50 us floor, MIN_EXCESS_NS, is the noise of the clock's reach: thread wake-ups and launch jitter
  move a step by tens of microseconds, so a step of 30 us that takes 50 us is not slow, and no outlier, hence
  no slow-iteration or periodic finding, is claimed from a smaller excess, however short the steps).
- A period (`every 5th`) needs at least MIN_PERIOD_OCCURRENCES = 4 outliers on it: three points fit a period
  by chance.
- A trend (iteration_stats' `trend`, said with the steady state): the step time of the steady-state steps that
  are not outliers has a rank correlation with the iteration number of at least TREND_RHO = 0.9, over at least
  TREND_MIN_STEPS = 8 steps, and its least-squares line changes by at least TREND_MIN_CHANGE = 25% of their
  median between the first and the last of them (a decode loop's steps grow with its context).

Step time (`step_ns`, what the flags and the steady-state figures judge):
- The CPU's window (`wall_ns`), unless the loop's GPU work outlasts it: when the median steady-state step
  keeps the GPU busy longer than its CPU window (median gpu_busy_ns > median wall_ns, steady state as the
  default warm-up of one iteration or `skip` sets it), the GPU cannot keep pace with the CPU (CUDA graphs,
  asynchronous streams: the CPU enqueues a step in 30 us that the GPU runs in 85 us), and the step is timed on
  the GPU: `gpu_step_ns`, from the start of the first GPU op launched in the step to the start of the first
  one launched in the next (for the last step, the span of its own ops). `step_clock` says which ('cpu' or
  'gpu'); a step that launched nothing keeps its CPU window. `step_idle_ns`: the step's idle time on that
  clock: idle_ns (the device ran nothing during the window) on the CPU clock, gpu_step_ns - gpu_busy_ns (at
  least 0) on the GPU clock.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import NoReturn

import polars as pl

from ..errors import NsysqlError
from ..rules import MAD_SIGMA
from . import scratch
from ._names import UNNAMED, cut, family_said, some_of, titled
from ._sql import _declared_params, run
from .advice import NVTX_HINT, unusable_gpu
from .patterns import resolve_range
from .ranges import range_totals

MIN_REPEATS = 3
# how a refusal to take a loop says to name one: by --range (`range=` in Python), which every command that finds the
# loop takes (iterations, gaps, summary, report, ranks, ...)
NAME_THE_LOOP = "name the loop with --range PATTERN"
"""A family must repeat at least this many times at one depth on one thread to be tried as the loop."""
MAX_CANDIDATES = 20
"""At most this many families are tried (in the order of iteration_candidates.sql) before detect abstains."""
MIN_WORK_SHARE = 0.5
"""Test 1: the share of iterations that must launch GPU work where the process launched some."""
MIN_RESEMBLANCE = 0.5
"""Test 2: the median Jaccard similarity of consecutive iterations' kernel and child range names."""
MIN_COVERAGE = 0.10
"""Test 3: the share of the process's GPU work time (or of the thread's NVTX extent) the iterations hold."""
OUTLIER_SIGMAS = 3.0
OUTLIER_FLOOR = 0.25
MIN_EXCESS_NS = 50_000
"""No step is an outlier by less than this over the median (see the module docstring)."""
MIN_PERIOD_OCCURRENCES = 4
"""A period is claimed only from at least this many outliers on it."""
RATIO_BAND = 1.25
"""The outlier sentence's one figure (`7.3x slower`) is said of the outliers within this factor of it; the others
are named apart with their own, and a period's steps beyond it get a range (`2.0x to 8.1x`)."""
MAX_AUTO_WARMUP_FRACTION = 0.10
PHASE_COLUMNS = 32
"""At most this many child range families get their own columns (`<name> cpu_ns`, `<name> gpu_ns`): those with
the most CPU time in the loop; the time of the others is summed in OTHER_CHILDREN_CPU / _GPU. Child ranges named
anew in each step (a batch id, a hash) would otherwise give a column pair per range: a table of steps x ranges."""
OTHER_CHILDREN_CPU = "other_children_cpu_ns"
OTHER_CHILDREN_GPU = "other_children_gpu_ns"
# the per-iteration columns that describe GPU work: null where the process launched none (not known: an export
# without GPU activity does not show that the GPU was unused), the parts of its wall time on the device too
GPU_COLUMNS = (
    "gpu_busy_ns",
    "gpu_span_ns",
    "gpu_start_ns",
    "gpu_step_ns",
    "kernel_ns",
    "memcpy_ns",
    "memset_ns",
    "graph_ns",
    "collective_ns",
    "compute_ns",
    "exposed_comm_ns",
    "copy_ns",
    "idle_ns",
    "comm_ns",
    "overlapped_ns",
    "kernels",
    "gpu_ops",
)


@dataclass
class IterationRange:
    """The range chosen as the iteration, and why."""

    names: list[str]
    family: str
    pid: int
    tid: int
    device_id: int | None  # None: the process launched no GPU work
    delimiter: bool
    why: str
    instances: int = 0
    extra: dict = field(default_factory=dict)
    depth: int = 0

    @property
    def mode(self) -> str:
        return "delimiter" if self.delimiter else "wrapper"


def detect(con, range: str | None = None) -> IterationRange:
    cands = run(con, "iteration_candidates")
    procs = run(con, "process_devices")
    # no GPU op left: whether the export recorded GPU activity that the load left out (the sentences say so)
    unusable = "" if procs.height else unusable_gpu(con)
    if cands.height == 0:
        _check_push_pop(con, range)
    if range is not None:  # "" too: the ranges without a name, named so by the user
        return _named(con, range, procs, unusable)
    every = cands
    cands = _candidates(cands, procs)
    screen = None
    rejected: list[tuple[dict, str]] = []
    for i, row in enumerate(cands.iter_rows(named=True)):
        if i == 1:  # the first failed (and is told in full): the rest are screened at once (_screen)
            screen = _screen(con, cands.slice(1))
        if _unnamed(row):
            rejected.append((row, UNNAMED_LOOP))
            continue
        bound = screen.row(i - 1, named=True) if screen is not None else None
        if bound and bound["work_share"] is not None:
            failed = _failed_test({**bound, "work": "GPU work", "resemblance": 1.0, "wall_share": None})
            if failed:
                rejected.append((row, failed))
                continue
        it = _candidate(row, procs)
        ev = (
            windows(con, it)
            .run("iteration_evidence", pid=it.pid, tid=it.tid, delimiter=it.delimiter)
            .row(0, named=True)
        )
        failed = _failed_test(ev)
        if failed:
            rejected.append((row, failed))
            continue
        it.instances = ev["iterations"]
        it.extra["evidence"] = ev
        it.why = (
            _why_detected(it, ev, procs.height > 0, rejected, unusable)
            + _inner_family(every, it)
            + _other_processes(it.pid, procs)
        )
        it.extra["unusable_gpu"] = unusable
        return it
    _no_loop(rejected)


def refusal(con) -> str | None:
    """Why no loop can be found, whatever `range` (no NVTX push/pop range at all, or none but those the load left
    out as flawed), or None."""
    if con.execute("SELECT EXISTS (SELECT 1 FROM nvtx_ranges WHERE style = 'PushPop')").fetchall()[0][0]:
        return None
    # ranges the export holds and the load left out (no interval: ended before they started, never ended) show
    # that the code was annotated: the hint to annotate it would be wrong there
    dropped = run(con, "dropped_rows", canonical="nvtx_ranges").item()
    if dropped:
        return (
            f"no NVTX push/pop range is left to find iterations in: the load left out the export's {dropped:,} "
            "flawed NVTX ranges (`nsysql info` says why, under data quality)"
        )
    return f"no NVTX push/pop ranges, so iterations cannot be found ({NVTX_HINT})"


def _check_push_pop(con, range: str | None) -> None:
    """Raise when the profile has no push/pop range that could be the loop (iteration_candidates found none):
    none at all, or, without a --range to name one, only PyTorch's own operator ranges."""
    if why := refusal(con):
        raise NsysqlError(why)
    _, pytorch = run(con, "pytorch_ranges").row(0)
    if range is None:  # every push/pop range is PyTorch's (iteration_candidates.sql leaves them out)
        raise NsysqlError(
            f"no repeating loop found: all {pytorch:,} push/pop ranges are PyTorch's own operator ranges "
            "(emit_nvtx, nsys --pytorch), which name operator calls, not steps, and the program repeats no "
            f"range of its own; {NAME_THE_LOOP}"
        )


def _candidates(cands: pl.DataFrame, procs: pl.DataFrame) -> pl.DataFrame:
    """The families to try, in order (see the module docstring), at most MAX_CANDIDATES; raises when none
    repeats MIN_REPEATS times."""
    if procs.height:  # the main thread of each process with GPU work (thread_ops > 0 there only)
        cands = cands.filter(pl.col("thread_ops") > 0)
    where = "the main thread of a process with GPU work" if procs.height else "any thread"
    cands = cands.filter(pl.col("instances") >= MIN_REPEATS)
    if cands.height == 0:
        raise NsysqlError(
            f"no repeating loop found: no NVTX range repeats {MIN_REPEATS}+ times at one depth on "
            f"{where}; {NAME_THE_LOOP}"
        )
    return cands.head(MAX_CANDIDATES)


def _screen(con, rest: pl.DataFrame) -> pl.DataFrame:
    """Tests 1 and 3 for the candidates after the first, at once, as upper bounds (iteration_screen.sql), one
    row per candidate in order; a family that fails them there fails them on its own windows too."""
    return run(
        con,
        "iteration_screen",
        pid=rest["pid"].to_list(),
        tid=rest["tid"].to_list(),
        depth=rest["depth"].to_list(),
        names=rest["names"].to_list(),
        delimiter=(rest["with_children"] == 0).to_list(),
    )


def _candidate(row: dict, procs: pl.DataFrame) -> IterationRange:
    """The iteration range a candidate row would be, before its tests (`why` is set once it passes them)."""
    dev = procs.filter(pl.col("pid") == row["pid"])
    return IterationRange(
        list(row["names"]),
        row["family"],
        row["pid"],
        row["tid"],
        dev["device_id"][0] if dev.height else None,
        row["with_children"] == 0,
        "",
        row["instances"],
        depth=row["depth"],
    )


def _why_detected(
    it: IterationRange, ev: dict, gpu_work: bool, passed_over: list[tuple[dict, str]], unusable: str = ""
) -> str:
    """Why the candidate `it` was taken as the loop, after the candidates `passed_over` (row, failed clause)
    failed their tests or had no name; `unusable`: where no GPU op is left, the clause saying the GPU activity
    recorded was all left out (unusable_gpu)."""
    unnamed = [row for row, failed in passed_over if failed == UNNAMED_LOOP]
    rejected = len(passed_over) - len(unnamed)
    where = (
        # nsysql's main thread (process_roles) is the thread whose ranges hold the process's GPU work: the program's
        # main thread (tid = pid on Linux) or another (a training loop run on a thread of its own, or Windows,
        # whose thread ids are not process ids), which is never called the main thread
        ("the main thread of its process" if it.tid == it.pid else MAIN_ROLE)
        if gpu_work
        else f"in a profile with no usable GPU work: {unusable}"
        if unusable
        else "in a profile with no GPU work traced"
    )
    why = (
        f"{family_said(it.family, it.names)} repeats {it.instances} times at depth {it.depth} on thread {it.tid}, "
        f"{where}; "
        f"taken as the loop because {_passed(ev)}"
    )
    if rejected:
        why += f" (tried after {rejected} range famil{'y' if rejected == 1 else 'ies'} that failed these tests)"
    if unnamed:  # the first one tried, as _no_loop names the first candidate
        first = unnamed[0]
        why += (
            f"; passed over before it: {UNNAMED} ({first['instances']} instances at depth {first['depth']} on "
            f"thread {first['tid']}"
            + (
                f", and {len(unnamed) - 1} more famil{'y' if len(unnamed) == 2 else 'ies'} without a name"
                if len(unnamed) > 1
                else ""
            )
            + f"), as {UNNAMED_LOOP}"
        )
    return why + (
        "; its instances hold no child ranges, so each iteration runs from one start to the next"
        if it.delimiter
        else "; each instance is one iteration"
    )


def _inner_family(cands: pl.DataFrame, it: IterationRange) -> str:
    """Where each iteration holds, one level down on its thread, a family of ranges that repeats MIN_REPEATS
    times or more per iteration on average (an epoch of batches): the clause that names it and how to take it as
    the loop instead, '' otherwise. The outermost loop is the rule; this says what it hides."""
    inner = cands.filter(
        (pl.col("pid") == it.pid)
        & (pl.col("tid") == it.tid)
        & (pl.col("depth") == it.depth + 1)
        & (pl.col("instances") >= MIN_REPEATS * max(it.instances, 1))
    ).sort(["instances", "family"], descending=[True, False])
    if not inner.height:
        return ""
    r = inner.row(0, named=True)
    name = family_said(cut(r["family"] or "", 60), r["names"])
    return (
        f"; each iteration holds {r['instances'] / it.instances:,.3g} {name} ranges on average ({r['instances']:,} "
        f"in all): `nsysql iterations --range {shlex.quote(r['family'])}` takes those as the loop"
    )


MAIN_ROLE = "the thread of its process whose NVTX ranges hold most of its GPU work"
"""Where the loop runs on a thread other than its process's first (tid = pid): what that thread is to nsysql."""

UNNAMED_LOOP = "its ranges have no name, and a loop is not guessed without one (--range '' takes them as the loop)"
"""Why a family of ranges without a name (NULL, empty or blank text) is never taken as the loop unless named with
--range: the candidates are told apart by name, so one without a name is a guess."""


def _unnamed(row: dict) -> bool:
    """Whether every range of the candidate family `row` has no name (NULL, empty or blank)."""
    return not any((n or "").strip() for n in row["names"])


def _no_loop(rejected: list[tuple[dict, str]]) -> NoReturn:
    """Raise that no candidate is the loop, telling the first one's failed test in full (at least one was
    tried: _candidates raises when there is none)."""
    row, failed = rejected[0]
    # the others, told apart: passed over for want of a name (UNNAMED_LOOP) is not failing a test
    unnamed = sum(f == UNNAMED_LOOP for _, f in rejected[1:])
    more = len(rejected) - 1 - unnamed
    raise NsysqlError(
        f"no repeating loop found: {family_said(cut(row['family'] or '', 60), row['names'])} ({row['instances']} "
        f"instances at depth "
        f"{row['depth']} on thread {row['tid']}, the first candidate) is not the loop: {failed}"
        + (f"; {more} other range famil{'y' if more == 1 else 'ies'} failed too" if more else "")
        + (f"; {unnamed} other famil{'y' if unnamed == 1 else 'ies'} without a name passed over" if unnamed else "")
        + f"; {NAME_THE_LOOP}"
    )


def _failed_test(ev: dict) -> str | None:
    """The first test of the module docstring the evidence fails, said as a clause, or None."""
    n, work = ev["iterations"], ev["work"]
    if work is not None and ev["with_work"] < MIN_WORK_SHARE * n:
        return f"{ev['with_work']} of its {n} iterations launch {work} (at least {MIN_WORK_SHARE:.0%} must)"
    if (ev["resemblance"] or 0) < MIN_RESEMBLANCE:
        return (
            f"consecutive iterations share {ev['resemblance'] or 0:.0%} of their {_held(work)} (median; at "
            f"least {MIN_RESEMBLANCE:.0%} for a loop)"
        )
    share = ev["work_share"] if work is not None else ev["wall_share"]
    if (share or 0) < MIN_COVERAGE:
        return f"its iterations hold {share or 0:.1%} of {_whole(work)} (at least {MIN_COVERAGE:.0%} for the loop)"
    return None


def _held(work: str | None) -> str:
    return {
        "kernels": "kernel and child range names",
        "kernels or CUDA graphs": "kernel, graph and child range names",
        "GPU ops": "GPU op and child range names",
    }.get(work or "", "child range names")


def _whole(work: str | None) -> str:
    return {
        "kernels": "the process's kernel time",
        "kernels or CUDA graphs": "the process's kernel and graph time",
        "GPU ops": "the process's GPU op time",
    }.get(work or "", "the thread's NVTX time")


def _passed(ev: dict) -> str:
    n, work = ev["iterations"], ev["work"]
    parts = [f"{ev['with_work']} of {n} iterations launch {work}"] if work is not None else []
    parts.append(f"consecutive iterations share {ev['resemblance']:.0%} of their {_held(work)} (median)")
    share = ev["work_share"] if work is not None else ev["wall_share"]
    parts.append(f"they hold {share:.0%} of {_whole(work)}")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _named(con, range: str, procs: pl.DataFrame, unusable: str = "") -> IterationRange:
    """The iteration range a --range pattern names (see the module docstring)."""
    names, how = resolve_range(con, range)
    found = run(con, "range_count", names=names)
    if found.height == 0:
        raise NsysqlError(
            f"`range` {range!r} selects only start/end ranges; iterations need push/pop ranges", option="range"
        )
    per_thread = found.group_by(["pid", "tid"]).agg(pl.col("n").sum()).sort(["n", "tid"], descending=[True, False])
    pid, tid, total = per_thread.row(0)
    mine = found.filter((pl.col("pid") == pid) & (pl.col("tid") == tid))  # most instances first, outermost on a tie
    depth, n, with_children = mine.select("depth", "n", "with_children").row(0)
    family = range if how != "exact" else names[0]
    why = (
        f"--range {range!r} selects {len(names)} range name{'s' if len(names) != 1 else ''} ({how} match), "
        f"{n} instance{'s' if n != 1 else ''} on thread {tid}"
    )
    if total > n:
        why += (
            f" at depth {depth} (of its {total}; the {total - n} at other depths are left out: one depth, so "
            "that no iteration holds another)"
        )
    dev = procs.filter(pl.col("pid") == pid)
    why += (
        "; its instances hold no child ranges, so each iteration runs from one start to the next"
        if with_children == 0
        else "; each instance is one iteration"
    )
    if dev.height == 0:
        why += (
            f"; no usable GPU work: {unusable}, so the GPU columns are empty"
            if unusable
            else "; no GPU work of the process was traced, so the GPU columns are empty"
        )
    others = found.filter(pl.col("pid") != pid).group_by("pid").agg(pl.col("n").sum())
    why += _other_processes(pid, procs, dict(others.iter_rows()))
    return IterationRange(
        list(names),
        family,
        pid,
        tid,
        dev["device_id"][0] if dev.height else None,
        with_children == 0,
        why,
        n,
        depth=depth,
        extra={"unusable_gpu": unusable},
    )


def _other_processes(pid: int, procs: pl.DataFrame, instances: dict[int, int] | None = None) -> str:
    """Where several processes did GPU work (one export of several ranks or workers): whose loop this is, and
    that the others' are left out, with how many instances of the range each holds (`instances`, pid -> n, for
    a --range); '' where at most one process did GPU work. The GPU columns are those of the chosen process on
    its main device: the iterations are one process's steps, not the job's."""
    if procs.height < 2:
        return ""
    dev = dict(procs.select("pid", "device_id").iter_rows())
    left = [
        f"process {p} (GPU {d}"
        + (
            f", {instances.get(p, 0)} instance{'s' if instances.get(p, 0) != 1 else ''} of the range"
            if instances is not None
            else ""
        )
        + ")"
        for p, d in procs.select("pid", "device_id").iter_rows()
        if p != pid
    ]
    mine = f"process {pid} (GPU {dev[pid]})" if pid in dev else f"process {pid} (no GPU work)"
    return (
        f"; the export holds {procs.height} processes with GPU work: the loop and its GPU columns are {mine}'s "
        f"alone, and {some_of(left)} {'is' if len(left) == 1 else 'are'} left out (`nsysql ranks` compares one "
        "export per rank: profile each process to its own file)"
    )


@dataclass(frozen=True)
class Windows:
    """The iteration windows of a range (iteration_windows.sql), held as a temp table on `con`: the input of
    every per-iteration query, which reads it as `query_table($windows)` and gets it only through `run`. Made
    by `windows()`; the table is named for the range it holds, so the windows of two ranges (detect tries
    several) never replace each other, and a query cannot read windows that nobody built for it (DuckDB says
    the table does not exist)."""

    con: object
    table: str

    def run(self, name: str, **params) -> pl.DataFrame:
        """The result of queries/v1/analyses/`name`.sql over these windows. The GPU ops come as tables shared by
        every query of this DuckDB that reads them: with their launch (`$ops`, launched_ops: gpu_ops joined to
        op_launch once, not once per query) and, process `pid`'s, placed in these windows' iterations
        (`$placed`, placed_ops: the ops meet the windows once)."""
        takes = _declared_params(name)
        if "ops" in takes or "placed" in takes:
            ops = launched_ops(self.con)
            if "ops" in takes:
                params["ops"] = ops
            if "placed" in takes:
                placed = {"ops": ops, "pid": params["pid"], "windows": self.table}
                params["placed"] = scratch.table(self.con, "_placed_", "placed_ops", placed)
            if "pid" not in takes:
                del params["pid"]
        if "windows" in takes:
            params["windows"] = self.table
        return run(self.con, name, **params)


def launched_ops(con) -> str:
    """The table of every GPU op with its launching call (launched_ops.sql), made once per DuckDB for every
    query that reads them (scratch.table)."""
    return scratch.table(con, "_launched_ops_", "launched_ops", {})


def windows(con, it: IterationRange) -> Windows:
    """The windows of `it` on `con`'s DuckDB: built once, read by every cursor of it (scratch.table: the
    workers of one request read the one table the first of them built)."""
    params = {"pid": it.pid, "tid": it.tid, "depth": it.depth, "names": it.names, "delimiter": it.delimiter}
    return Windows(con, scratch.table(con, "_iterations_", "iteration_windows", params))


def iterations(
    con,
    range: str | None = None,
    skip: int | None = None,
    it: IterationRange | None = None,
    outlier_sigmas: float = OUTLIER_SIGMAS,
) -> pl.DataFrame:
    """One row per iteration: times, GPU busy/idle, per-kind GPU time, flags (`outlier_sigmas`: k of the outlier
    rule), and per child range family CPU/GPU time: the PHASE_COLUMNS families of the most CPU time, the others
    summed in other_children_cpu_ns / other_children_gpu_ns (present only where there are others)."""
    it = it or detect(con, range)
    win = windows(con, it)
    df = win.run("iterations", pid=it.pid, device=it.device_id)
    phases = win.run("iteration_phases", delimiter=it.delimiter, totals=range_totals(con, "process"))
    df = flag(steps(df, skip, gpu=it.device_id is not None), skip, outlier_sigmas)
    if phases.height:
        # a child range without a name (NULL, empty or blank text) has a column titled as the sentences name it,
        # never " cpu_ns": one column for all such children, as they are one family to quoted() too
        phases = phases.with_columns(pl.col("phase").map_elements(titled, return_dtype=pl.String))
        totals = phases.group_by("phase", maintain_order=True).agg(pl.col("cpu_ns").sum()).with_row_index()
        top = set(totals.sort(["cpu_ns", "index"], descending=[True, False]).head(PHASE_COLUMNS)["phase"])
        order = [p for p in totals["phase"] if p in top]  # in the order the loop first meets them
        if len(order) < totals.height:
            rest = phases.filter(~pl.col("phase").is_in(order)).group_by("iteration")
            rest = rest.agg(
                pl.col("cpu_ns").sum().alias(OTHER_CHILDREN_CPU), pl.col("gpu_ns").sum().alias(OTHER_CHILDREN_GPU)
            )
            phases = phases.filter(pl.col("phase").is_in(order))
        else:
            rest = None
        wide = phases.pivot(on="phase", index="iteration", values=["cpu_ns", "gpu_ns"], aggregate_function="sum")
        cols = []
        for p in order:
            for v in ("cpu_ns", "gpu_ns"):
                src = f"{v}_{p}" if f"{v}_{p}" in wide.columns else p
                cols.append(pl.col(src).fill_null(0).alias(f"{p} {v}"))
        df = df.join(wide.select("iteration", *cols), on="iteration", how="left")
        if rest is not None:
            df = df.join(rest, on="iteration", how="left").with_columns(
                pl.col(OTHER_CHILDREN_CPU, OTHER_CHILDREN_GPU).fill_null(0)
            )
    if it.device_id is None:  # no GPU work in the process: nothing to say about it, not 0 ns busy
        gpu = [
            c
            for c in df.columns
            if c in GPU_COLUMNS or c.endswith(" gpu_ns") or c in ("step_idle_ns", OTHER_CHILDREN_GPU)
        ]
        schema = df.schema  # built anew at each `df.schema`: once, not once a column
        df = df.with_columns([pl.lit(None, dtype=schema[c]).alias(c) for c in gpu])
    from .metrics import activity

    act = activity(win, it.pid, it.device_id)  # only where the export sampled GPU metrics
    if act is not None:  # beside gpu_busy_ns
        at = df.columns.index("gpu_busy_ns") + 1
        df = df.join(act, on="iteration", how="left").select(*df.columns[:at], *act.columns[1:], *df.columns[at:])
    return df


def breakdown(con, it: IterationRange) -> dict[str, pl.DataFrame]:
    """Per iteration of `it`: the GPU time of each op name launched in it (`kernels`, iteration_kernels.sql) and
    the CPU time of each NVTX range family that starts in it (`ranges`, iteration_ranges.sql)."""
    win = windows(con, it)
    return {
        "kernels": win.run("iteration_kernels", pid=it.pid),
        "ranges": win.run("iteration_ranges", pid=it.pid, totals=range_totals(con, "process")),
    }


def spans(
    con,
    range: str | None = None,
    skip: int | None = None,
    it: IterationRange | None = None,
    outlier_sigmas: float = OUTLIER_SIGMAS,
) -> pl.DataFrame:
    """The iteration windows with their flags, without the GPU work per iteration: iteration, name, start_ns,
    end_ns, wall_ns, warmup and outlier, the same as in `iterations()` where its steps are timed on the CPU (the
    flags read wall_ns only; a loop timed on the GPU, see step_ns, is flagged on its GPU steps there). Enough
    to index gaps by iteration, for ~0.25 CPU s less than `iterations()` at 500k kernels."""
    it = it or detect(con, range)
    return flag(windows(con, it).run("iteration_spans"), skip, outlier_sigmas)


def steps(df: pl.DataFrame, skip: int | None, gpu: bool = True) -> pl.DataFrame:
    """`df` (iterations.sql's rows) with gpu_step_ns, step_ns, step_idle_ns and step_clock, by the rule of the
    module docstring. `gpu`: whether the process launched GPU work (else the CPU's window, always)."""
    start = pl.col("gpu_start_ns")
    nxt = start.shift(-1).fill_null(strategy="backward")  # the first op of the next step that launched any
    df = df.with_columns(
        gpu_step_ns=pl.when(start.is_null())
        .then(None)
        .when(nxt.is_null())
        .then(pl.col("gpu_span_ns"))
        # the next step's first op may start before this one's when another stream ran it first: at least 0
        .otherwise((nxt - start).clip(lower_bound=0))
        .cast(pl.Int64)
    )
    steady = df.filter(pl.col("iteration") >= (1 if skip is None else skip))
    on_gpu = (
        gpu
        and steady.height > 0
        and steady["gpu_start_ns"].null_count() < steady.height
        and float(steady["gpu_busy_ns"].median()) > float(steady["wall_ns"].median())
    )
    if not on_gpu:
        return df.with_columns(step_ns=pl.col("wall_ns"), step_idle_ns=pl.col("idle_ns"), step_clock=pl.lit("cpu"))
    return df.with_columns(
        step_ns=pl.coalesce("gpu_step_ns", "wall_ns"),
        step_idle_ns=pl.when(pl.col("gpu_step_ns").is_null())
        .then(pl.col("idle_ns"))
        .otherwise((pl.col("gpu_step_ns") - pl.col("gpu_busy_ns")).clip(lower_bound=0)),
        step_clock=pl.lit("gpu"),
    )


def flag(df: pl.DataFrame, skip: int | None, outlier_sigmas: float = OUTLIER_SIGMAS) -> pl.DataFrame:
    """Warm-up and outlier flags (module docstring), judged on step_ns where `df` has it, else on wall_ns;
    `outlier_sigmas`: k of the outlier rule."""
    if skip is not None and skip < 0:
        raise NsysqlError(f"`skip` must be 0 or more, not {skip}", option="skip")
    col = "step_ns" if "step_ns" in df.columns else "wall_ns"
    n = 1 if skip is None else skip
    steady = df.filter(pl.col("iteration") >= n)[col]
    if steady.len() == 0:
        return df.with_columns(warmup=pl.col("iteration") < n, outlier=pl.lit(False))
    thr = outlier_threshold(steady, outlier_sigmas)
    if skip is None:
        times = df.sort("iteration")[col].to_list()
        cap = max(2, int(MAX_AUTO_WARMUP_FRACTION * len(times)))
        while n < min(cap, len(times) - 1) and times[n] > thr:
            n += 1
        thr = outlier_threshold(df.filter(pl.col("iteration") >= n)[col], outlier_sigmas)
    df = df.with_columns(warmup=pl.col("iteration") < n)
    return df.with_columns(outlier=(~pl.col("warmup")) & (pl.col(col) > thr))


def outlier_threshold(
    times: pl.Series,
    sigmas: float = OUTLIER_SIGMAS,
    floor: float = OUTLIER_FLOOR,
    min_excess_ns: int = MIN_EXCESS_NS,
) -> float:
    """The step time above which a steady-state step is an outlier: median + max(sigmas x 1.4826 x MAD,
    floor x median, min_excess_ns)."""
    med = float(times.median())
    mad = float((times - med).abs().median())
    return med + max(sigmas * MAD_SIGMA * mad, floor * med, min_excess_ns)


# A steady state whose step time grows (or shrinks) with the iteration, as a decode loop's does with its context:
# its median is no typical step, and its slowest steps are the trend's end, not outliers to fix. Said where the
# rank correlation of step time with the iteration number is at least TREND_RHO over at least TREND_MIN_STEPS
# steady-state steps, and the least-squares line changes by at least TREND_MIN_CHANGE of the median over them.
TREND_RHO = 0.9
TREND_MIN_STEPS = 8
TREND_MIN_CHANGE = 0.25


def trend(steady: pl.DataFrame, col: str) -> str | None:
    """The sentence saying that the steady-state step time (`col` of `steady`, its outliers left out: a stall is
    no part of the trend) grows or shrinks steadily with the iteration (TREND_RHO, TREND_MIN_STEPS,
    TREND_MIN_CHANGE), with its slope and fitted ends; None otherwise."""
    typical = steady.filter(~pl.col("outlier")) if "outlier" in steady.columns else steady
    if typical.height < TREND_MIN_STEPS:
        return None
    left = steady.height - typical.height
    xy = typical.select(x=pl.col("iteration").cast(pl.Float64), y=pl.col(col).cast(pl.Float64))
    rho = xy.select(pl.corr("x", "y", method="spearman")).item()
    if rho is None or abs(rho) < TREND_RHO:
        return None
    x, y = xy["x"], xy["y"]
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    first, last = float(y.mean() + slope * (x.min() - x.mean())), float(y.mean() + slope * (x.max() - x.mean()))
    if abs(last - first) < TREND_MIN_CHANGE * float(y.median()):
        return None
    aside = f", the {left} outlier{'s' if left != 1 else ''} aside" if left else ""
    return (
        f"step time {'grows' if slope > 0 else 'shrinks'} steadily with the iteration, {slope / 1e6:+.3f} ms per "
        f"iteration (a line from {duration(first)} to {duration(last)} over iterations {int(x.min())}-"
        f"{int(x.max())}{aside}; rank correlation {rho:.2f}): the median is no typical step"
    )


def stats(df: pl.DataFrame, it: IterationRange) -> pl.DataFrame:
    """Steady-state summary: count, median, p90, max, CV of iteration time, median GPU busy %, outlier pattern."""
    steady = df.filter(~pl.col("warmup"))
    col = "step_ns" if "step_ns" in df.columns else "wall_ns"
    t = steady[col].cast(pl.Float64)
    clock = df["step_clock"][0] if "step_clock" in df.columns and df.height else "cpu"
    row = {
        "range": it.family,
        # how sentences name the loop (nsysql.analyses._names.family_said): `range` quoted, or its ranges' names
        "range_said": family_said(it.family, it.names),
        "mode": it.mode,
        "iterations": df.height,
        "warmup": int(df["warmup"].sum()),
        "steady": steady.height,
        # the clock the step times below are on: 'cpu' (the iteration's window) or 'gpu' (the GPU's work
        # outlasts the CPU's window: iterations' step_ns); median_ns ... cv are of the step time on it
        "step_clock": clock,
        "median_ns": float(t.median()) if steady.height else None,
        "mean_ns": float(t.mean()) if steady.height else None,
        "p90_ns": float(t.quantile(0.9, "linear")) if steady.height else None,
        "max_ns": float(t.max()) if steady.height else None,
        "cv": float(t.std() / t.mean()) if steady.height > 1 and t.mean() else None,
        # the median share of a step in which the GPU was busy (_median_busy_pct)
        "median_gpu_busy_pct": _median_busy_pct(steady, clock),
        # the median CPU window (wall_ns) of the steady-state steps, whatever the clock
        "cpu_median_ns": float(steady["wall_ns"].median()) if steady.height else None,
        # on the GPU clock: how far the CPU runs ahead, the longest the GPU ran a steady-state step's ops after
        # its CPU window closed (null on the CPU clock)
        "cpu_lead_ns": _cpu_lead(steady) if clock == "gpu" and steady.height else None,
        # the steady-state steps' time in all (sum of step_ns) and their GPU idle time in all (step_idle_ns):
        # one denominator for the busy and idle shares of the headline (null idle without GPU work)
        "steady_ns": int(t.sum()) if steady.height else None,
        "steady_idle_ns": int(steady["step_idle_ns"].sum())
        if "step_idle_ns" in steady.columns and steady.height and steady["step_idle_ns"].null_count() == 0
        else None,
        # the device whose idle time the iterations measure (null without GPU work)
        "device_id": it.device_id,
        # kernels launched in the steady-state iterations (null without GPU work): what a finding about kernel
        # launches in the loop rests on
        "steady_kernels": int(steady["kernels"].sum()) if steady["kernels"].null_count() == 0 else None,
        # communication in the steady-state iterations (iterations' comm_ns, exposed_comm_ns): ns in all, and
        # the exposed part as a share of their wall time; null without communication
        "steady_comm_ns": int(steady["comm_ns"].sum()) if steady.height and steady["comm_ns"].sum() else None,
        "exposed_comm_pct": float(100.0 * steady["exposed_comm_ns"].sum() / steady["wall_ns"].sum())
        if steady.height and steady["comm_ns"].sum() and steady["wall_ns"].sum()
        else None,
        "outliers": int(steady["outlier"].sum()),
        "outlier_pattern": pattern(df),
        # the steady state's trend with the iteration, as a sentence (trend()), or null
        "trend": trend(steady, col),
        "detected": it.why,
        # where no GPU op is left and the export recorded GPU activity the load left out: the clause saying so
        # (advice.unusable_gpu), else ''
        "unusable_gpu": it.extra.get("unusable_gpu", ""),
    }
    return pl.DataFrame([row])


def _median_busy_pct(steady: pl.DataFrame, clock: str) -> float | None:
    """The median share of a steady-state step in which the GPU was busy: on the CPU clock the device ran
    something during the window (so at most 100%), not gpu_busy_ns / wall_ns (work launched in an iteration
    may run after its window ends, e.g. a window that only times the launches of a CUDA graph); on the GPU
    clock the step's own ops covered its GPU step (at most 100%)."""
    if not steady.height or steady["idle_ns"].null_count():
        return None
    if clock == "gpu":
        share = (steady["step_ns"] - steady["step_idle_ns"]) / steady["step_ns"]
    else:
        share = (steady["wall_ns"] - steady["idle_ns"]) / steady["wall_ns"]
    return float((share * 100).median())


def _cpu_lead(steady: pl.DataFrame) -> float | None:
    """The longest time by which a steady-state step's GPU ops ended after its CPU window (at least 0)."""
    lead = (steady["gpu_start_ns"] + steady["gpu_span_ns"] - steady["end_ns"]).drop_nulls()
    return float(max(lead.max(), 0)) if lead.len() else None


def duration(ns: float) -> str:
    """A step time as people read it: ms with two decimals, us under a millisecond."""
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} us"


def clock_clause(s: dict) -> str:
    """On the GPU clock, the clause that says so and by how much the CPU runs ahead; else empty."""
    if s.get("step_clock") != "gpu":
        return ""
    return (
        f"timed on the GPU, whose work outlasts the CPU's window: the CPU enqueues a step in "
        f"{duration(s['cpu_median_ns'])} (median) and runs ahead, by up to {duration(s['cpu_lead_ns'] or 0)}"
    )


def steady_sentence(s: dict) -> str:
    """One row of stats() as the sentence every front end prints: how many iterations the steady state holds,
    their median, mean, p90 and max time, CV and median GPU busy share; or that every iteration is warm-up."""
    if not s["steady"]:
        n = s["iterations"]
        which = "the only iteration is" if n == 1 else f"all {n} iterations are"
        return f"steady state: none ({which} warm-up; --skip N sets how many to leave out, --skip 0 none)"
    busy = (
        f"GPU busy {s['median_gpu_busy_pct']:.0f}% of a step (median)"
        if s["median_gpu_busy_pct"] is not None
        else f"no usable GPU work: {s['unusable_gpu']}"
        if s.get("unusable_gpu")
        else "no GPU work traced in the process"
    )
    clock = clock_clause(s)
    return (
        f"steady state ({s['steady']} of {s['iterations']}{'; ' + clock if clock else ''}): median "
        f"{duration(s['median_ns'])}, mean {duration(s['mean_ns'])}, p90 {duration(s['p90_ns'])}, max "
        f"{duration(s['max_ns'])}, CV {s['cv'] or 0:.2f}, {busy}" + (f"; {s['trend']}" if s.get("trend") else "")
    )


def exposed_sentence(s: dict) -> str:
    """One row of stats() with communication: its exposed part as a share of the steady-state wall time."""
    return (
        f"{s['exposed_comm_pct']:.1f}% of the steady-state iterations' wall time: communication kernels ran with no "
        f"compute kernel beside them on the device ({s['steady_comm_ns'] / 1e6:,.1f} ms of communication in "
        f"{s['steady']} iterations; `nsysql overlap FILE --by iteration` per iteration)"
    )


def pattern(df: pl.DataFrame) -> str | None:
    """ "iterations 9, 19, 29, … (every 10th) are 9.2x slower than the median", or None.

    The period is the step d for which the most outliers fall in one residue class (index mod d), provided that
    class holds at least MIN_PERIOD_OCCURRENCES outliers, most of the outliers, and nearly every d-th iteration
    across its span. Times are step_ns (the step on its clock).
    """
    steady = df.filter(~pl.col("warmup"))
    out = steady.filter(pl.col("outlier"))
    if out.height == 0:
        return None
    col = "step_ns" if "step_ns" in df.columns else "wall_ns"
    med = float(steady.filter(~pl.col("outlier"))[col].median() or steady[col].median())
    idx = out["iteration"].to_list()
    cpu = dict(zip(idx, out[col].to_list()))
    period, members = periodic(idx)
    main = members or idx
    times = {i: cpu[i] / med if med else float("nan") for i in idx}
    ratio = sorted(times[i] for i in main)[len(main) // 2]
    if not period and med:
        # one figure is said only of the steps it fits: an outlier far from it is named apart with its own
        # (9, 19, 29 at 7.3x and 18 at 1.9x are not four steps 7.3x slower)
        main = [i for i in main if ratio / RATIO_BAND <= times[i] <= ratio * RATIO_BAND]
        ratio = sorted(times[i] for i in main)[len(main) // 2]
    spread = [times[i] for i in main]
    figure = (
        f"{ratio:.1f}x"
        if not med or all(ratio / RATIO_BAND <= t <= ratio * RATIO_BAND for t in spread)
        else f"{min(spread):.1f}x to {max(spread):.1f}x"
    )
    # the first six, with how many in all and the period in one parenthesis
    shown = some_of([str(i) for i in main], note=f"every {_ordinal(period)}" if period else "")
    noun, verb = ("iteration", "is") if len(main) == 1 else ("iterations", "are")
    text = f"{noun} {shown} {verb} {figure} slower than the median"
    others = [i for i in idx if i not in main]
    if others:
        named = [f"{i} ({times[i]:.1f}x)" if med else str(i) for i in others]
        text += f"; also slow: {some_of(named)}"
    return text


def periodic(idx: list[int]) -> tuple[int | None, list[int]]:
    """The period of outlier indices and the outliers on it, or (None, [])."""
    if len(idx) < MIN_PERIOD_OCCURRENCES:
        return None, []
    diffs = [b - a for a, b in zip(idx, idx[1:])]
    common = sorted(set(diffs), key=lambda d: (-diffs.count(d), d))[:5]
    cands = {k for d in common for k in range(2, d + 1) if d % k == 0 and k <= 10_000}
    best: tuple[int, int, list[int]] | None = None
    for d in sorted(cands):
        classes: dict[int, list[int]] = {}
        for i in idx:
            classes.setdefault(i % d, []).append(i)
        cls = max(classes.values(), key=len)
        span = (cls[-1] - cls[0]) // d + 1
        if len(cls) >= MIN_PERIOD_OCCURRENCES and len(cls) >= 0.6 * len(idx) and len(cls) >= 0.75 * span:
            if best is None or len(cls) > best[1] or (len(cls) == best[1] and d > best[0]):
                best = (d, len(cls), cls)
    return (best[0], best[2]) if best else (None, [])


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
