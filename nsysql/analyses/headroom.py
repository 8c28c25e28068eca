"""Headroom: the time each finding would give back per steady-state iteration if fixed, and what it needs.

The step (inputs named in STEP_COLUMN, IDLE_COLUMN, EXPOSED_COLUMN: the iterations' columns read):
- The steady-state iterations (not warm-up) are the *typical* steps (not outliers) and the outliers.
- The step (Step.step_ns) is the mean time of the steady-state steps (iterations' step_ns: the step on its
  clock, the GPU's where the GPU outlasts the CPU): what the loop costs per iteration over the run, so the most
  that all fixes together can give back per iteration. headroom_pct is a share of it.
- It splits exactly into three pools of time, per iteration:
  `idle`, the mean GPU idle time of a typical step (the device ran nothing);
  `busy`, the rest of a typical step (its mean time minus that idle); where the steps are timed on the CPU
  (iterations' step_clock 'cpu': the CPU outlasts the GPU) and the GPU idles CAP_MIN_IDLE of a typical step or
  more, at most the time the loop's process spent per typical step in CUDA calls that can wait for the GPU
  (work(), iteration_gpu_waits.sql): GPU work that finishes sooner shortens such a step only by the CPU's wait
  for it (a GPU that hardly idles sets the pace, and its time is the pool);
  `slow`, what the outliers add to the mean (the step minus the mean typical step).
- Each finding draws on one pool (FORMULAS). Findings of one pool overlap (every idle-time finding explains
  part of the same idle time; every compute-time finding part of the same busy time), so the pool caps their
  sum: largest estimate first, each keeps at most what the ones before it left. The additive findings
  therefore never add up to more than the step. The two copy findings (COPY_FINDINGS: pinning pageable copies,
  overlapping exposed ones) also share the copies' own time (copy_time) in the same way: together they never
  give back more than the copies take.
- `GPU mostly idle` is a symptom, not a cause: its headroom is the whole idle pool, which the idle-time findings
  share; it is marked not additive and listed after the additive findings.
- Without a loop (no iterations) there is no step to save from: every headroom is null, and basis says so.

Findings are ordered: additive ones by headroom, largest first, then the symptoms, then those without a
headroom, each group in the order findings made them. A finding whose preconditions (NEEDS) do not hold is
left out. The formulas and their parameters are below; README's findings section has the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ._sql import run
from .findings import MATRIX_CATEGORIES

# The iterations' columns the step and its pools are read from (nsysql.analyses.iterations): the step on its
# clock (the CPU's window, or the GPU's step where the GPU outlasts the CPU) and its GPU idle time on that clock
STEP_COLUMN = "step_ns"
IDLE_COLUMN = "step_idle_ns"
EXPOSED_COLUMN = "exposed_comm_ns"
GRAPH_COLUMN = "graph_ns"  # GPU time of CUDA graphs traced whole (`--cuda-graph-trace=graph`): no kernel of theirs
WAIT_COLUMN = "gpu_wait_ns"  # of work(): time in CUDA calls that can wait for the GPU (iteration_gpu_waits.sql)

# Tensor cores: the speedup of matrix kernels moved from CUDA cores to tensor cores, by the precision of the
# cheapest lever the hardware offers. Conservative on purpose: a quarter of the dense peak ratios (TF32 8x FP32
# on A100 and H100; FP16 8x FP32 on V100 and T4), as small or thin matrices reach far less than the peak
# (fixtures/hw_alt measures 15x for bf16 over fp32 CUDA-core products on an H200, where bf16 peaks at 16x).
TENSOR_CORE_SPEEDUP = {"tf32": 2.0, "fp16": 2.0}
# compute capability (major * 10 + minor) from which each lever exists: TF32 (one switch, float32 kept) from
# 8.0, fp16 autocast on 7.x, none below 7.0 (no tensor cores)
TF32_FROM_CC = 80
TENSOR_CORES_FROM_CC = 70
# Pageable copies: pinned copies of at least this size each measure the pinned rate (smaller ones measure the
# copy's latency)
PINNED_RATE_MIN_BYTES = 2**20
POOLS = ("idle", "busy", "slow")
CAP_MIN_IDLE = 0.1  # the GPU's idle share of a typical step from which the CPU's waits cap the busy pool
CAP_SAID_NS = 1000  # the least cap, in ns, that a finding's basis says (less is the pools' float arithmetic)


@dataclass(frozen=True)
class Needs:
    """A finding's preconditions, as data: what hardware, framework and captured data it needs."""

    hardware: str = "any"
    framework: str = "any"
    captured: str = ""

    def __str__(self) -> str:
        return f"hardware: {self.hardware}; framework: {self.framework}; captured: {self.captured}"


@dataclass(frozen=True)
class Formula:
    """How a finding's headroom is estimated: its pool, whether it adds to the others, the formula in words."""

    pool: str
    text: str
    additive: bool = True


_LOOP = "a loop (an NVTX range that repeats)"
_CAUSE = Formula(
    "idle", "mean idle per typical step in gaps >= 1 ms whose cause is the finding's (the time the fix removes)"
)
_CALLS = Formula(
    "idle",
    "mean time per typical step that the finding's CUDA API calls cover in gaps >= 1 ms of its cause (the calls "
    "the fix removes; the rest of such a gap has no evidence of theirs)",
)
FORMULAS: dict[str, Formula] = {
    "data-loader bound": _CAUSE,
    "host bound": _CAUSE,
    "synchronization bound": _CALLS,
    "allocation stalls": _CALLS,
    "copy bound": _CALLS,
    "launch bound": Formula(
        "idle",
        "mean idle per typical step outside gaps >= 1 ms (the gaps between kernels that slow launches leave; an "
        "upper bound: CUDA graphs or fusion remove the launches, not the kernels)",
    ),
    "GPU mostly idle": Formula(
        "idle", "mean idle per typical step: a symptom, the idle the idle-time findings share", additive=False
    ),
    "slow iterations": Formula("slow", "mean step minus mean typical step (what the outliers add per iteration)"),
    "periodic slow iterations": Formula(
        "slow", "mean step minus mean typical step (what the outliers add per iteration)"
    ),
    "exposed communication": Formula(
        "busy",
        "mean exposed communication per typical step (an upper bound: all of it overlapped with compute, none of it "
        "a wait for a slower rank)",
    ),
    "pageable host-to-device copies": Formula(
        "busy",
        "their GPU time per typical step minus their bytes at the measured pinned rate; without pinned copies "
        f">= {PINNED_RATE_MIN_BYTES // 2**20} MiB to measure it, their whole GPU time (an upper bound)",
    ),
    "transfer bound": Formula(
        "busy",
        "mean per typical step of the time copies between host and device run on the loop's device with no kernel "
        "beside them, each step's at most its kernel (and graph) time: what overlapping them with compute could "
        "hide (an upper bound; copying less can give more, which no trace measures)",
    ),
    "matrix math without tensor cores": Formula(
        "busy",
        "their GPU time per typical step x (1 - 1/speedup), speedup "
        + ", ".join(f"{k} {v:g}x" for k, v in TENSOR_CORE_SPEEDUP.items())
        + " (conservative), by the lever the GPU has: TF32 from compute capability 8.0, fp16 on 7.x",
    ),
}

# where the gaps fall in no NVTX range (cause `unknown`), the main thread's scheduling tells host work instead
_HOST_CAPTURE = (
    f"NVTX ranges on the main thread (-t nvtx), or its scheduling events (--cpuctxsw); CUDA trace (-t cuda); {_LOOP}"
)
NEEDS: dict[str, Needs] = {
    "data-loader bound": Needs(captured=_HOST_CAPTURE),
    "host bound": Needs(captured=_HOST_CAPTURE),
    "synchronization bound": Needs(captured=f"CUDA API trace (-t cuda); {_LOOP}"),
    "allocation stalls": Needs(captured=f"CUDA API trace (-t cuda); {_LOOP}"),
    "copy bound": Needs(captured=f"CUDA API trace (-t cuda); {_LOOP}"),
    "launch bound": Needs(captured=f"CUDA API trace with launch calls (-t cuda); {_LOOP} that launches kernels"),
    "GPU mostly idle": Needs(captured=f"CUDA trace (-t cuda); {_LOOP}"),
    "slow iterations": Needs(captured=_LOOP),
    "periodic slow iterations": Needs(captured=_LOOP),
    "exposed communication": Needs(captured=f"communication kernels (NCCL) in the CUDA trace; {_LOOP}"),
    "pageable host-to-device copies": Needs(captured=f"CUDA memcpy trace with memory kinds (-t cuda); {_LOOP}"),
    "transfer bound": Needs(captured=f"CUDA memcpy trace (-t cuda); {_LOOP}"),
    "matrix math without tensor cores": Needs(
        hardware="tensor cores: compute capability 7.0 or higher",
        captured=f"kernel names, or GPU metrics (--gpu-metrics-devices); {_LOOP}",
    ),
}

COLUMNS = ["headroom_ms", "headroom_pct", "pool", "additive", "needs", "headroom_basis"]


def tables(con) -> dict[str, pl.DataFrame]:
    """The whole-profile table headroom reads (summary asks it beside its other small tables)."""
    return {
        "headroom_facts": run(con, "headroom_facts", min_bytes=PINNED_RATE_MIN_BYTES, matrix=list(MATRIX_CATEGORIES))
    }


def work(windows, pid: int, device: int | None = None) -> pl.DataFrame:
    """Per iteration of `windows` (iterations.Windows of process `pid`): the GPU time of matrix kernels on CUDA
    cores and of pageable host-to-device copies, and those copies' bytes (iteration_headroom.sql); and the time
    copies between host and device ran on `device` (the loop's; None: the process ran no GPU work) with no kernel
    beside them (iteration_host_copies.sql); and the time the process's threads spent in CUDA calls that can
    wait for the GPU (iteration_gpu_waits.sql: the busy pool's cap on a step timed on the CPU). An iteration
    without such work counts 0."""
    got = windows.run("iteration_headroom", pid=pid, matrix=list(MATRIX_CATEGORIES))
    waits = windows.run("iteration_gpu_waits", pid=pid)
    if device is None:
        exposed = waits.select("iteration", pl.lit(0, pl.Int64).alias("host_copy_exposed_ns"))
    else:
        exposed = windows.run("iteration_host_copies", device=device)
    out = got.join(exposed, on="iteration", how="full", coalesce=True).join(
        waits, on="iteration", how="full", coalesce=True
    )
    return out.with_columns(pl.exclude("iteration").fill_null(0)).sort("iteration")


@dataclass(frozen=True)
class Step:
    """The steady-state step and its pools (the module docstring): ns per iteration."""

    steady: int
    typical: list[int]  # iteration numbers of the typical steps
    outliers: list[int]  # and of the outliers
    step_ns: float
    typical_ns: float
    idle_ns: float | None  # None: the loop's process has no GPU work
    busy_ns: float | None
    slow_ns: float
    # on a step timed on the CPU: the time per typical step the process spent in calls that can wait for the GPU,
    # the most that GPU work finishing sooner gives back (busy_ns is capped at it); None on the GPU's clock
    waited_ns: float | None = None

    def pool(self, name: str) -> float | None:
        return {"idle": self.idle_ns, "busy": self.busy_ns, "slow": self.slow_ns}[name]

    def busy_capped(self) -> bool:
        """Whether the busy pool is the CPU's wait for the GPU rather than the GPU's busy time (waited_ns)."""
        return (
            self.waited_ns is not None and self.idle_ns is not None and self.waited_ns < self.typical_ns - self.idle_ns
        )

    def per_typical(self, frame: pl.DataFrame | None, column: str) -> float:
        """The mean over the typical steps of `column` of `frame` (one row per iteration; a typical step
        without a row counts 0)."""
        if frame is None or not frame.height:
            return 0.0
        mine = frame.filter(pl.col("iteration").is_in(self.typical))
        return float(mine[column].sum() or 0) / len(self.typical)


def step(its: pl.DataFrame | None, work: pl.DataFrame | None = None) -> Step | None:
    """The step and its pools from an iterations frame (None without a steady-state iteration). `work`: the
    per-iteration work (work()); where the steps are timed on the CPU (iterations' step_clock), its GPU waits cap
    the busy pool: a step that ends when the CPU is done shortens by GPU work finishing sooner only where the
    CPU waited for that work."""
    if its is None:
        return None
    steady = its.filter(~pl.col("warmup"))
    if not steady.height:
        return None
    typical = steady.filter(~pl.col("outlier"))
    n = typical.height
    if not n:  # the median step is never an outlier, so a steady state has typical steps; none: no step to read
        return None
    step_ns = float(steady[STEP_COLUMN].sum()) / steady.height
    typical_ns = float(typical[STEP_COLUMN].sum()) / n
    idle = None if typical[IDLE_COLUMN].null_count() else float(typical[IDLE_COLUMN].sum()) / n
    cpu_clock = "step_clock" in steady.columns and steady["step_clock"][0] == "cpu"
    # where the GPU idles less than CAP_MIN_IDLE of the step it sets the pace, whatever the CPU's calls say (a
    # launch blocked on a full queue of short kernels waits less than the waits counted take to be seen)
    paced = idle is not None and idle >= CAP_MIN_IDLE * typical_ns
    waited = None
    if cpu_clock and paced and work is not None and WAIT_COLUMN in work.columns:
        mine = work.filter(pl.col("iteration").is_in(typical["iteration"].implode()))
        waited = float(mine[WAIT_COLUMN].sum() or 0) / n
    busy = None if idle is None else typical_ns - idle
    return Step(
        steady=steady.height,
        typical=typical["iteration"].to_list(),
        outliers=steady.filter(pl.col("outlier"))["iteration"].to_list(),
        step_ns=step_ns,
        typical_ns=typical_ns,
        idle_ns=idle,
        busy_ns=busy if busy is None or waited is None else min(busy, waited),
        slow_ns=max(step_ns - typical_ns, 0.0),
        waited_ns=waited,
    )


@dataclass
class Inputs:
    """What the formulas read: the step, the iterations, the gaps (>= 1 ms, indexed by iteration), the idle
    causes the findings read, the per-iteration work (work()) and the whole-profile facts (tables())."""

    step: Step | None
    its: pl.DataFrame | None
    gaps: pl.DataFrame | None
    causes: pl.DataFrame | None
    work: pl.DataFrame | None
    facts: dict | None


def _cause_of(name: str, inp: Inputs) -> str | None:
    """The idle cause a cause-keyed finding rests on (as findings.py picks it)."""
    fixed = {"synchronization bound": "sync", "allocation stalls": "alloc", "copy bound": "memcpy"}
    if name in fixed:
        return fixed[name]
    if inp.causes is not None and inp.causes.height:
        return inp.causes["cause"][0]
    return None


def _cause_idle(name: str, inp: Inputs) -> tuple[float | None, str]:
    cause = _cause_of(name, inp)
    if cause is None or inp.gaps is None:
        return None, "no idle causes to measure"
    # a cause of CUDA API calls (sync, alloc, memcpy) may name a gap its calls cover only a part of (a fifth
    # is enough where no range covers half: gaps.sql): the fix removes the calls, so only the part they cover
    calls = FORMULAS[name] is _CALLS
    took = pl.col("duration_ns") * pl.col("api_cover_pct") / 100 if calls else pl.col("duration_ns")
    per_it = inp.gaps.filter(pl.col("cause") == cause).group_by("iteration").agg(took.sum().alias("duration_ns"))
    ns = inp.step.per_typical(per_it, "duration_ns")
    # a cause in backticks, as gaps' causes are code; one that already quotes a name in them (`host:` and a range
    # really named "(unnamed range)", as _names.titled titles it) as it is: a span inside a span shows neither
    said = cause if "`" in cause else f"`{cause}`"
    what = f"{said} calls in {said} gaps" if calls else f"{said} idle"
    basis = f"{ns / 1e6:,.3f} ms of {what} per typical step ({len(inp.step.typical)} steps)"
    rest = per_it.filter(pl.col("iteration").is_in(inp.step.outliers))["duration_ns"].sum()
    if rest:  # the same cause in the outliers: part of what they add, the slow pool
        basis += f"; its {rest / 1e6:,.3f} ms in the outliers count in the slow iterations' headroom"
    return ns, basis


def _launch(name: str, inp: Inputs) -> tuple[float | None, str]:
    s = inp.step
    big = 0.0
    if inp.gaps is not None:
        per_it = inp.gaps.group_by("iteration").agg(pl.col("duration_ns").sum())
        big = s.per_typical(per_it, "duration_ns")
    ns = max(s.idle_ns - big, 0.0)
    return ns, (
        f"{s.idle_ns / 1e6:,.3f} ms idle per typical step, {big / 1e6:,.3f} ms of it in gaps >= 1 ms: an upper "
        "bound (the launches go, the kernels stay)"
    )


def _idle(name: str, inp: Inputs) -> tuple[float | None, str]:
    ns = inp.step.idle_ns
    return ns, f"the {ns / 1e6:,.3f} ms idle per typical step that the idle-time findings share; not additive"


def _slow(name: str, inp: Inputs) -> tuple[float | None, str]:
    s = inp.step
    n = s.steady - len(s.typical)
    return s.slow_ns, (
        f"mean step {s.step_ns / 1e6:,.3f} ms - mean typical step {s.typical_ns / 1e6:,.3f} ms "
        f"({n} outlier{'s' if n != 1 else ''} of {s.steady})"
    )


def _exposed(name: str, inp: Inputs) -> tuple[float | None, str]:
    ns = inp.step.per_typical(inp.its, EXPOSED_COLUMN)
    return ns, (
        f"{ns / 1e6:,.3f} ms exposed communication per typical step: an upper bound, as if none of it waited for a "
        "slower rank"
    )


def _pageable(name: str, inp: Inputs) -> tuple[float | None, str]:
    s, f = inp.step, inp.facts or {}
    ns, nbytes = s.per_typical(inp.work, "pageable_ns"), s.per_typical(inp.work, "pageable_bytes")
    if not ns and not nbytes:  # the finding counts the copies of the whole profile; the steps may hold none
        return 0.0, (
            "no pageable copy in a typical steady-state step: the copies counted are in warm-up, the outlier "
            "steps or outside the loop, so fixing them gives no time back per step"
        )
    if f.get("pinned_ns") and f.get("pinned_bytes"):
        rate = f["pinned_bytes"] / f["pinned_ns"]  # bytes per ns = GB/s
        pinned = nbytes / rate
        return max(ns - pinned, 0.0), (
            f"{ns / 1e6:,.3f} ms of pageable copies per typical step ({nbytes / 2**20:,.1f} MiB) - "
            f"{pinned / 1e6:,.3f} ms at the pinned rate measured here ({rate:,.1f} GB/s, "
            f"{f['pinned_copies']:,} copies)"
        )
    return ns, (
        f"{ns / 1e6:,.3f} ms of pageable copies per typical step ({nbytes / 2**20:,.1f} MiB): an upper bound, "
        f"no pinned copy >= {PINNED_RATE_MIN_BYTES // 2**20} MiB here to measure the pinned rate"
    )


def _transfer(name: str, inp: Inputs) -> tuple[float | None, str]:
    # overlapping a step's exposed copies with its compute hides at most that compute's length: a step of 51 ms
    # of copies and 3 ms of kernels gives back 3 ms that way, however pinned its memory (copying less gives
    # more, by an amount no trace measures)
    s = inp.step
    # a step has iterations (inp.its) whenever it has a step; work() is None only where nothing was measured
    compute = [pl.col(c).fill_null(0) for c in ("kernel_ns", GRAPH_COLUMN) if c in inp.its.columns]
    both = (
        inp.work.join(
            inp.its.select("iteration", pl.sum_horizontal(compute).alias("_compute")), on="iteration", how="left"
        ).with_columns(pl.min_horizontal("host_copy_exposed_ns", pl.col("_compute").fill_null(0)).alias("_hidden"))
        if inp.work is not None
        else None
    )
    exposed, ns = s.per_typical(both, "host_copy_exposed_ns"), s.per_typical(both, "_hidden")
    return ns, (
        f"{exposed / 1e6:,.3f} ms per typical step of copies between host and device with no kernel beside them, "
        f"each step's at most its own GPU compute time, behind which overlapping could hide them: an upper bound"
    )


def _tensor_cores(name: str, inp: Inputs) -> tuple[float | None, str]:
    s, f = inp.step, inp.facts or {}
    whole = s.per_typical(inp.its, GRAPH_COLUMN) if inp.its is not None and GRAPH_COLUMN in inp.its.columns else 0
    if whole:  # the steps' kernels ran inside graphs traced whole: none of them is recorded, none can be counted
        return None, (
            f"the typical step replays CUDA graphs traced whole ({whole / 1e6:,.3f} ms of graph time per step), whose "
            "kernels the export does not record: their matrix kernels cannot be counted (record with "
            "`nsys profile --cuda-graph-trace=node`)"
        )
    ns = s.per_typical(inp.work, "simt_matrix_ns")
    low = f.get("simt_cc_min")
    known = f.get("simt_devices_known") and f.get("simt_devices_known") == f.get("simt_devices")
    unknown = (f.get("simt_devices") or 0) - (f.get("simt_devices_known") or 0)
    if unknown and (f.get("simt_unknown_sampled") or 0) < unknown:
        # a GPU that does not say its compute capability may have no tensor cores (below sm_70): the time is
        # theirs only where it has, which the export cannot tell (nsys samples GPU metrics, which would, on
        # Turing and later only)
        return None, (
            f"{ns / 1e6:,.3f} ms of matrix kernels on CUDA cores per typical step, which tensor cores would shorten "
            "only where the GPU has them (compute capability 7.0 or higher): the export does not say which GPU ran "
            "them, so what they give back is not known"
        )
    if known and low >= TF32_FROM_CC:
        lever = "tf32"
    elif known and low >= TENSOR_CORES_FROM_CC:
        lever = "fp16"
    else:  # compute capability not (all) known: the smallest of the speedups
        lever = min(("tf32", "fp16"), key=lambda k: TENSOR_CORE_SPEEDUP[k])
    speedup = TENSOR_CORE_SPEEDUP[lever]
    where = (
        f"compute capability {low // 10}.{low % 10}"
        if known
        else "compute capability unknown; GPU metrics sampled there, so Turing (sm_75) or later"
    )
    return ns * (1 - 1 / speedup), (
        f"{ns / 1e6:,.3f} ms of matrix kernels on CUDA cores per typical step x (1 - 1/{speedup:g}), "
        f"{lever} at {speedup:g}x ({where})"
    )


_COMPUTE = {
    "data-loader bound": _cause_idle,
    "host bound": _cause_idle,
    "synchronization bound": _cause_idle,
    "allocation stalls": _cause_idle,
    "copy bound": _cause_idle,
    "launch bound": _launch,
    "GPU mostly idle": _idle,
    "slow iterations": _slow,
    "periodic slow iterations": _slow,
    "exposed communication": _exposed,
    "pageable host-to-device copies": _pageable,
    "transfer bound": _transfer,
    "matrix math without tensor cores": _tensor_cores,
}


def unmet(name: str, inp: Inputs) -> str | None:
    """Why the preconditions of finding `name` do not hold, or None when they do (or cannot be checked)."""
    f = inp.facts or {}
    if name == "matrix math without tensor cores":
        if f.get("simt_devices") and f.get("simt_devices_known") == f.get("simt_devices"):
            if f["simt_cc_max"] < TENSOR_CORES_FROM_CC:
                return "no tensor cores below compute capability 7.0"
    return None


# The findings that give back the time of copies between host and device, each its own way (pinning them makes
# them faster, overlapping hides them): both at once cannot give back more than the copies take
COPY_FINDINGS = ("pageable host-to-device copies", "transfer bound")


def copy_time(inp: Inputs) -> float:
    """The copies' time per typical step that the copy findings share: the larger of the pageable host-to-device
    copies' GPU time and the time copies between host and device ran with no kernel beside them (their union is
    at least that; the smaller part lies mostly inside the larger, as a pageable copy blocks its stream)."""
    s = inp.step
    return max(s.per_typical(inp.work, "pageable_ns"), s.per_typical(inp.work, "host_copy_exposed_ns"))


def rank(findings: pl.DataFrame, inp: Inputs) -> pl.DataFrame:
    """`findings` (finding, evidence, ...) without those whose preconditions do not hold, with COLUMNS added,
    in the order of the module docstring."""
    rows = []
    for i, r in enumerate(findings.iter_rows(named=True)):
        name = r["finding"]
        if unmet(name, inp):
            continue
        formula, compute = FORMULAS.get(name), _COMPUTE.get(name)
        raw, basis = None, "no headroom formula for this finding"
        if formula and inp.step is None:
            basis = "no loop, so no steady-state step to give time back to (`nsysql iterations` says why)"
        elif formula and inp.step.pool(formula.pool) is None:
            basis = "no GPU work of the loop's process was traced to measure it on"
        elif formula:
            raw, basis = compute(name, inp)
        rows.append(
            {
                **r,
                "_order": i,
                "_raw": raw,
                "pool": formula.pool if formula else None,
                "additive": formula.additive if formula else None,
                "needs": str(NEEDS[name]) if name in NEEDS else None,
                "headroom_basis": basis,
            }
        )
    # each pool caps the findings that share it: largest estimate first, each keeps what the others left; the
    # copy findings also share the copies' own time (copy_time), which each would give back in its own way
    left = {p: inp.step.pool(p) for p in POOLS} if inp.step else {}
    copies = copy_time(inp) if inp.step and sum(r["finding"] in COPY_FINDINGS for r in rows) > 1 else None
    all_copies = copies
    for r in sorted(rows, key=lambda r: (-(r["_raw"] or 0), r["_order"])):
        if r["_raw"] is None:
            r["_ns"] = None
            continue
        pool = left.get(r["pool"]) or 0.0
        r["_ns"] = min(r["_raw"], pool) if r["additive"] else min(r["_raw"], inp.step.pool(r["pool"]) or 0.0)
        if r["additive"]:
            r["headroom_basis"] += _capped(r, pool, inp.step)
            left[r["pool"]] = pool - r["_ns"]
        if copies is not None and r["finding"] in COPY_FINDINGS:
            if r["_ns"] > copies:
                # what the pool gave it beyond the copies' time goes back to the pool
                left[r["pool"]] = left.get(r["pool"], 0.0) + r["_ns"] - copies
                r["_ns"] = copies
                r["headroom_basis"] += (
                    f"; capped at what the other copy finding left of the copies' {all_copies / 1e6:,.3f} ms "
                    "per typical step (their time, counted once)"
                )
            copies -= r["_ns"]
    rows.sort(key=lambda r: (r["_ns"] is None, not r["additive"], -(r["_ns"] or 0), r["_order"]))
    step_ns = inp.step.step_ns if inp.step else None
    out = [
        {
            **{k: v for k, v in r.items() if not k.startswith("_") and k not in COLUMNS},
            "headroom_ms": None if r["_ns"] is None else round(r["_ns"] / 1e6, 3),
            "headroom_pct": None if r["_ns"] is None or not step_ns else round(100 * r["_ns"] / step_ns, 1),
            **{k: r[k] for k in COLUMNS[2:]},
        }
        for r in rows
    ]
    schema = {c: findings.schema[c] for c in findings.columns} | {
        "headroom_ms": pl.Float64,
        "headroom_pct": pl.Float64,
        "pool": pl.String,
        "additive": pl.Boolean,
        "needs": pl.String,
        "headroom_basis": pl.String,
    }
    df = pl.DataFrame(out, schema=schema, orient="row") if out else pl.DataFrame(schema=schema)
    # the figures first after the finding's name, so the table shows them before the long evidence sentence
    first = ["finding", "headroom_ms", "headroom_pct", "pool", "additive"]
    return df.select(*first, pl.exclude(*first))


def _capped(r: dict, pool: float, step: Step) -> str:
    """What rank() adds to an additive finding's basis where its pool (`pool` of it left) capped its estimate:
    the CPU's wait for the GPU (a busy pool on the CPU's clock, Step.busy_capped), or the other findings."""
    # a cap under CAP_SAID_NS is the pools' float arithmetic (an idle pool split exactly), not a cap to say
    if r["_ns"] >= r["_raw"] - CAP_SAID_NS:
        return ""
    if r["pool"] == "busy" and step.busy_capped():
        return (
            f"; capped at the {step.waited_ns / 1e6:,.3f} ms per typical step the loop's process spent in CUDA calls "
            "that wait for the GPU (the steps end when the CPU is done: GPU work that finishes sooner gives back "
            "only the time the CPU waited for it)"
            + (", less what the other busy-time findings took" if pool < step.busy_ns else "")
        )
    return f"; capped at what the other {r['pool']}-time findings left of that pool"


# `fix first` names a finding only where fixing it gives back at least this share of the step: a 0.3% gain (one
# slow iteration in 187, say) is not where a user should start, and saying so would send them the wrong way
FIX_FIRST_MIN_PCT = 2.0


def top_line(findings: pl.DataFrame, step: Step | None, min_pct: float = FIX_FIRST_MIN_PCT) -> tuple[str, str] | None:
    """The first line of summary, the report and the Markdown snippet, as (label, text): the finding with most
    headroom (`fix first`) when it gives back at least `min_pct` of the step, or why the findings are not
    ranked, or that none gives time back worth fixing first; None without findings."""
    if not findings.height:
        return None
    n = findings.height
    r = findings.row(0, named=True)
    # a headroom whose formula gives only an upper bound (its basis says so) is said as one, never as a promise
    upto = "up to " if "upper bound" in (r["headroom_basis"] or "") else ""
    if r["headroom_ms"] is None:
        return "findings", f"{n} finding{'s' if n != 1 else ''}, not ranked by headroom: {r['headroom_basis']}"
    if r["headroom_ms"] == 0:  # under half a microsecond: nothing to fix first
        unmeasured = findings.filter(pl.col("headroom_ms").is_null())
        if unmeasured.height:  # a finding the steps may still pay for: never say that none does
            u = unmeasured.row(0, named=True)
            return "findings", (
                f"{n} findings, none measured giving back time in the steady-state steps (0 ms per iteration "
                f"each, of a {step.step_ns / 1e6:,.3f} ms mean step); {u['finding']} cannot be measured: "
                f"{u['headroom_basis']}"
            )
        return "findings", (
            f"{n} finding{'s' if n != 1 else ''}, none giving back time in the steady-state steps (0 ms per "
            f"iteration each, of a {step.step_ns / 1e6:,.3f} ms mean step; headroom_basis says why)"
        )
    if r["headroom_pct"] < min_pct:
        return "findings", (
            f"{n} finding{'s' if n != 1 else ''}, none worth fixing first: the largest, {r['finding']}, gives back "
            f"{upto}{r['headroom_ms']:,.3f} ms per iteration ({r['headroom_pct']:.1f}% of the {step.step_ns / 1e6:,.2f} ms "
            f"mean steady-state step; fix first takes {min_pct:g}% or more)"
        )
    symptom = "" if r["additive"] else " (a symptom: no finding names its cause)"
    return "fix first", (
        f"{r['finding']}{symptom}: {upto}{r['headroom_ms']:,.2f} ms per iteration ({r['headroom_pct']:.0f}% of the "
        f"{step.step_ns / 1e6:,.2f} ms mean steady-state step) — {r['evidence']}"
    )
