"""Findings: short rule-based sentences, each with the number behind it.

Rules and thresholds (steady state = iterations that are not warm-up, when iterations apply). The idle-time
findings (the first three) need idle time worth a finding: at least 10% of the time counted (the steady-state
iterations; without a loop, the devices' active span). Where there is a loop but no gap >= 1 ms falls in its
steady-state steps, they say nothing: that idle time is start-up or tear-down, which no step waits on. A rank busy 90% of the time whose 4 ms of idle fall in `data` is
not data-loader bound.
- `data-loader bound`: >= 50% of steady-state idle time falls under one NVTX range on the main thread
  (cause `host:<range>`); named a data-loader when the range name says data/load/input/batch/fetch/augment and
  the range is not one PyTorch opened itself (`aten::batch_norm` is an operator).
  When another thread or process worked during those gaps (gaps.top_activity: not waiting, >= 20% of that
  idle time), the finding names the activity and where it ran (a DataLoader worker's transform, say); where no
  traced call or range did, what the CPU did (cpu.story: the main thread's wait, the other threads' time on a
  CPU and their top frames). It is also named data-loader bound, whatever the range's name, when that CPU
  evidence shows the main thread waiting while DataLoader workers computed (cpu.story's rule).
  Idle time of cause `unknown` (>= 50%: no NVTX range or CUDA call names it, as between the ranges of a
  delimiter loop) is `host bound` where scheduling events show the main thread on a CPU for >= 50% of it (the
  CPU computed while the GPU waited), `data-loader bound` where that CPU evidence names the loader.
- `synchronization bound`: >= 30% of idle time has cause `sync` (the CPU waits in a synchronize call).
- `allocation stalls`: >= 20% of idle time has cause `alloc` (cudaMalloc/cudaFree in the loop).
- `launch bound`: the GPU idles between kernels while the queue is empty and launches are slower than the
  kernels, in the figures of `nsysql launches` (queries/v1/analyses/launch_figures.sql): median steady-state
  GPU busy < 50%, >= 50% of kernels start within 10 us of their launch call returning (or before), and the
  median launch call, or the median time from one launch call to the process's next (the CPU's time per kernel,
  Python and framework work between launches included), takes longer than the median kernel; unless the idle
  time is already explained by host work: a data-loader/host-bound finding whose gaps (>= 1 ms) hold >= 50% of
  the steady-state idle time (its headroom is the idle outside those gaps, which host work in them does not
  explain). Only where the
  steady-state iterations launch kernels: iterations that launch none say nothing about launches. The
  thresholds are launch_bound()'s parameters and `host_explains_share`.
- `pageable host-to-device copies`: memcpy HtoD from pageable memory, 1 MiB or more in all (they stage through
  a bounce buffer and block the CPU; pinned memory makes them asynchronous). A few bytes of kernel arguments
  or scalars copied this way are not worth a finding. PyTorch's pin_memory=True is advised only where the export
  shows PyTorch (advice.py).
- `transfer bound`: copies between host and device memory (is_host_copy in 00_macros.sql: host-to-device and
  device-to-host, never device-to-device or peer, which stay on the GPUs) fill >= 50% of a device's busy time (the
  union of their intervals against that of every op: host_copies.sql; the time no kernel ran beside them,
  host_copies_exposed.sql, is read only where the finding is made) and move 1 MiB or more there (a GPU busy for
  microseconds with a few bytes of arguments and results is bound by nothing). The evidence: the copies, their bytes
  and GPU time, the rate they reached (bytes over GPU time) and how much of their time no kernel ran beside them
  (exposed). The advice follows what the export shows: where most of their bytes are in pageable host memory, pinning
  it (said once: where the pageable finding is made, it is named instead); where they are not and most of their time
  is exposed, overlapping them with compute or copying less; where kernels already run beside most of it, copying less
  alone. The memory kind is never guessed: a copy whose kind the export does not say counts as neither. Counted over
  the whole profile, as the pageable and tensor-core findings are; its headroom is what the steady-state steps would
  give back.
- `periodic slow iterations`: the iteration outlier pattern, when there is one, with where the outliers' extra
  time is (slow_phase: the child range that grows by at least half of it, or that none does).
- `GPU mostly idle`: median steady-state GPU busy < 30%.
- `exposed communication`: communication kernels run with no compute kernel beside them on the device for
  >= 20% of the steady-state iterations' wall time (iterations' exposed_comm_ns: overlap it with compute, or
  find the rank the others wait for with `nsysql ranks`).
- `matrix math without tensor cores`: matrix kernels (category gemm or conv) that run on CUDA cores (tensor_cores
  `no`) hold >= 10% of all kernel time. Where the export has GPU metrics they judge (Tensor Active under 1% while
  SMs Active is 50% or more in the samples taken while the kernel ran alone on its device:
  queries/v1/canonical/49_kernel_tensor_use.sql), else the name
  does (the rules of queries/v1/canonical/44_kernel_rules.sql); the evidence says which. Kernels whose names say
  nothing (`unknown`) and that the metrics do not judge are never counted. Only where a GPU that ran kernels has
  tensor cores (sm_70 and later); the advice follows the compute capability (advice.tensor_core_advice).
On a profile of several GPUs with a loop, the launch, pageable-copy, transfer and tensor-core findings count the
loop's device alone, as the headline and the idle findings do (another process's work is no time its step gives
back), and say so; without a loop they say that they count every GPU together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from . import advice as _advice
from ._names import SECONDS_FROM_NS, quoted, said_ns, some_of, untitled
from ._sql import run
from .iterations import OTHER_CHILDREN_CPU, launched_ops

HOST_SHARE = 0.50
SYNC_SHARE = 0.30
ALLOC_SHARE = 0.20
LAUNCH_BUSY_PCT = 50.0
EMPTY_QUEUE_NS = 10_000
EMPTY_QUEUE_SHARE = 0.50
HOST_EXPLAINS_SHARE = 0.50
IDLE_BUSY_PCT = 30.0
EXPOSED_COMM_PCT = 20.0
PAGEABLE_MIN_BYTES = 2**20
HOST_COPY_SHARE = 0.50
HOST_COPY_MIN_BYTES = 2**20
MIN_IDLE_PCT = 10.0
NO_TENSOR_CORE_PCT = 10.0
MATRIX_CATEGORIES = ("gemm", "conv")
PAGEABLE = "pageable host-to-device copies"
# what exposed communication gives back depends on what it is, which one rank's export cannot tell: a collective
# that moves data hides behind compute; one that waits inside for a slower rank (its kernel runs until that rank
# arrives) hides nothing, and gives its time back only when that rank is fixed
EXPOSED_COMM_ADVICE = (
    "overlapping it with compute hides the time it moves data; the time it waits in the collective for a slower "
    "rank no overlap hides (`nsysql ranks` over one export per rank names the rank the others wait for)"
)
DATA_WORDS = re.compile(r"data|load|input|batch|fetch|augment|prefetch|collate", re.I)


@dataclass(frozen=True)
class Thresholds:
    """The limits the rules above apply, each defaulting to its constant (summary and findings take them as
    their `thresholds` parameter). Shares are fractions of the idle time in gaps (host_copy_share: of a device's
    busy time); *_pct are percentages."""

    min_idle_pct: float = MIN_IDLE_PCT
    host_share: float = HOST_SHARE
    sync_share: float = SYNC_SHARE
    alloc_share: float = ALLOC_SHARE
    launch_busy_pct: float = LAUNCH_BUSY_PCT
    empty_queue_ns: int = EMPTY_QUEUE_NS
    empty_queue_share: float = EMPTY_QUEUE_SHARE
    host_explains_share: float = HOST_EXPLAINS_SHARE
    idle_busy_pct: float = IDLE_BUSY_PCT
    exposed_comm_pct: float = EXPOSED_COMM_PCT
    pageable_min_bytes: int = PAGEABLE_MIN_BYTES
    host_copy_share: float = HOST_COPY_SHARE
    host_copy_min_bytes: int = HOST_COPY_MIN_BYTES
    no_tensor_core_pct: float = NO_TENSOR_CORE_PCT


def _ms(ns) -> str:
    """A total in ms, or in seconds from SECONDS_FROM_NS (_names.said_ns)."""
    return said_ns(ns) if abs(ns) >= SECONDS_FROM_NS else f"{ns / 1e6:,.1f} ms"


def _dur(ns) -> str:
    """A duration with the unit that keeps its digits: 21.3 ms, 480 us, 14,404.9 s."""
    return _ms(ns) if abs(ns) >= 1e6 else f"{ns / 1e3:,.0f} us"


def slow_phase(its: pl.DataFrame | None, share: float = 0.5, con=None) -> str:
    """Where the outlier steps' extra time is, as a clause for the slow-iteration finding: the child range whose
    CPU time grows most from the typical steady-state step to an outlier, when it holds at least `share` of the
    outliers' extra wall time; else that no child range does. Where the outliers do not agree (each one's own
    growth, against its own extra time), the range is said of those it holds for and the others are named apart.
    Said only for steps timed on the CPU (the phases are CPU times) and with child ranges to compare; empty
    otherwise. With `con`, also the CUDA call the range's time went to in those steps (phase_calls)."""
    if its is None or not its.height or "outlier" not in its.columns:
        return ""
    steady = its.filter(~pl.col("warmup"))
    if "step_clock" in steady.columns and steady.height and steady["step_clock"][0] != "cpu":
        return ""
    slow, typical = steady.filter(pl.col("outlier")), steady.filter(~pl.col("outlier"))
    phases = [c[: -len(" cpu_ns")] for c in its.columns if c.endswith(" cpu_ns")]
    if not slow.height or not typical.height or not phases:
        return ""
    typical_wall = typical["wall_ns"].mean()
    extra = slow["wall_ns"].mean() - typical_wall
    if not extra or extra <= 0:
        return ""
    base = _means(typical, phases)  # the typical step, once: every outlier below is weighed against it
    grew, phase = _top_growth(_means(slow, phases), base)
    apart = _apart(slow, base, typical_wall, phase, share)
    if grew >= share * extra:
        where = f"{quoted(untitled(phase))} (+{_dur(grew)} on the CPU)"
        held = slow.filter(pl.col("iteration").is_in(apart[0])) if apart else slow
        calls = phase_calls(con, held, phase) if con is not None else ""
        return f"; their extra {_dur(extra)} a step is in {where}" + (
            f" for iterations {_list(apart[0])}{calls}; {apart[1]}" if apart else calls
        )
    names = ", ".join(quoted(untitled(p)) for p in phases[:4]) + (", ..." if len(phases) > 4 else "")
    most = f"the most: {quoted(untitled(phase))}, {'+' if grew >= 0 else ''}{_dur(grew)}"
    # the children together (those without a column of their own too): where they hold the extra time, it is
    # spread over their names, not spent outside them (child ranges named anew in each step, say)
    children = [f"{p} cpu_ns" for p in phases] + [c for c in (OTHER_CHILDREN_CPU,) if c in its.columns]
    inside = _children_mean(slow, children) - _children_mean(typical, children)
    if inside >= share * extra:
        return (
            f"; their extra {_dur(extra)} a step is in the step's child ranges (+{_dur(inside)} on the CPU), "
            f"no one name holding {share:.0%} of it ({names}; {most})"
        )
    return (
        f"; their extra {_dur(extra)} a step is in none of the step's child ranges ({names}; {most}): it is spent "
        "in the step range itself, outside its children"
    )


def _children_mean(steps: pl.DataFrame, columns: list[str]) -> float:
    """The mean over `steps` of the CPU time in all of the step's child ranges (the `columns`), a missing time 0."""
    return steps.select(pl.sum_horizontal(pl.col(columns).fill_null(0))).to_series().mean()


def phase_calls(con, slow: pl.DataFrame, phase: str) -> str:
    """What the CPU did in child range `phase` during the `slow` steps, as a clause: the CUDA call that took at
    least half of the range's time there, a step's share of it, and, where the process's GPU ran collectives for
    at least half of that call, that it waited for another rank (a synchronize behind an all-reduce). Empty where
    no one call took half."""
    got = run(
        con,
        "slow_phase_calls",
        range_name=untitled(phase),
        starts=slow["start_ns"].to_list(),
        ends=slow["end_ns"].to_list(),
    )
    in_phase = slow[f"{phase} cpu_ns"].fill_null(0).sum()
    if not got.height or not in_phase or got["call_ns"][0] * 2 < in_phase:
        return ""
    r = got.row(0, named=True)
    text = f", where `{r['call']}` took {_dur(r['call_ns'] / slow.height)} a step"
    if r["comm_ns"] * 2 >= r["call_ns"]:
        text += " while the GPU ran collectives: a wait for another rank (`nsysql ranks` names it)"
    return text


def _top_growth(times: dict[str, float], base: dict[str, float]) -> tuple[float, str]:
    """The child range whose CPU time grows most from `base` (the typical steps' means) to `times` (the outliers'
    means, or one outlier's own), with that growth."""
    return max((times[p] - base[p], p) for p in base)


def _means(steps: pl.DataFrame, phases: list[str]) -> dict[str, float]:
    """Each child range's mean CPU time over `steps`, a missing time counted as 0."""
    return {p: steps[f"{p} cpu_ns"].fill_null(0).mean() for p in phases}


def _apart(slow, base: dict[str, float], typical_wall: float, phase: str, share: float) -> tuple[list[int], str] | None:
    """Where the outliers' own extra time lies, when `phase` does not hold it for every one: (the iterations it
    holds for, a clause naming the others with their own range or none), or None when it holds for all. Each
    outlier is weighed alone against `base` and `typical_wall`, the typical steps' means taken once: a loop of
    many outliers stays linear."""
    mine: list[int] = []
    other: dict[str, list[int]] = {}
    for row in slow.iter_rows(named=True):
        # the mean of one value is that value, as a float
        grew, top = _top_growth({p: float(row[f"{p} cpu_ns"] or 0) for p in base}, base)
        own = row["wall_ns"] - typical_wall
        if top == phase and grew >= share * own:
            mine.append(row["iteration"])
        else:
            key = quoted(untitled(top)) if own > 0 and grew >= share * own else "none of the child ranges"
            other.setdefault(key, []).append(row["iteration"])
    if not other or not mine:
        return None
    return mine, "; ".join(f"that of {_list(its)} is in {where}" for where, its in other.items())


def _list(iterations: list[int]) -> str:
    """The numbers in order, the first six where there are more, with how many in all (some_of)."""
    return some_of([str(i) for i in sorted(iterations)])


def tables(con, empty_queue_ns: int = EMPTY_QUEUE_NS) -> dict[str, pl.DataFrame]:
    """The tables findings reads besides the iteration stats and idle causes (summary asks them beside its
    other answers), over every device."""
    return _device_tables(con, empty_queue_ns, None)


def _device_tables(con, empty_queue_ns: int, device_id: int | None) -> dict[str, pl.DataFrame]:
    """The GPU work figures of tables() and the compute capabilities their advice rests on: of device
    `device_id` alone, or of every device (None)."""
    ops = launched_ops(con)
    return {
        "launch_figures": run(con, "launch_figures", empty_queue_ns=empty_queue_ns, ops=ops, device_id=device_id),
        "pageable_copies": run(con, "pageable_copies", device_id=device_id),
        "host_copies": run(con, "host_copies", device_id=device_id),
        "kernel_categories": run(con, "kernels_by_category", device_id=device_id),
        "advice_facts": run(con, "advice_facts", device_id=device_id),
        "activity_names": run(con, "activity_names", device_id=device_id),
    }


def _scope(con, st: dict | None, read: dict, empty_queue_ns: int) -> tuple[dict, str]:
    """What the GPU work findings count, and where, in words (after `on`): with a loop on a profile of several
    GPUs, its device alone (the GPU whose busy and idle shares the headline and the idle findings give: another
    process's copies or kernels are no time this loop's step gives back), re-read here; without a loop, every
    device together, said so. ('' on a profile of one GPU.)"""
    gpus = read.get("gpus")
    n = gpus.height if gpus is not None else con.execute("SELECT count(DISTINCT device_id) FROM gpu_ops").fetchone()[0]
    if n < 2:
        return read, ""
    dev = st.get("device_id") if st is not None else None
    if dev is None:
        return read, f"{n} GPUs together"
    others = "the other GPU" if n == 2 else f"the other {n - 1} GPUs"
    return {**read, **_device_tables(con, empty_queue_ns, dev)}, f"GPU {dev}, the loop's ({others} not counted)"


def findings(
    con,
    iteration_stats: pl.DataFrame | None,
    causes: pl.DataFrame | None,
    read: dict[str, pl.DataFrame] | None = None,
    activity: str | None = None,
    its: pl.DataFrame | None = None,
    limits: Thresholds = Thresholds(),
    loader: bool = False,
    slow: str | None = None,
    on_cpu: float | None = None,
) -> pl.DataFrame:
    """`read`: what tables(con, limits.empty_queue_ns) returns, when the caller has it already. `activity`: the
    sentence naming the work elsewhere during the top cause's gaps (gaps.top_activity or cpu.story), added to a
    host-bound finding; `loader`: that cpu.story's sentence names the data loader as what the GPU waited for.
    `its`: the iterations, whose child-range times say where the outliers' extra time went (slow_phase). `slow`:
    cpu.story's sentence over the outlier steps' gaps alone, where it names the data loader (the slow steps'
    cause). `on_cpu`: the share of the top cause's gaps the main thread spent on a CPU (cpu.story's, from
    scheduling events; None unmeasured). `limits`: the rules' thresholds."""
    read = read or tables(con, limits.empty_queue_ns)
    st = iteration_stats.row(0, named=True) if iteration_stats is not None and iteration_stats.height else None
    read, where = _scope(con, st, read, limits.empty_queue_ns)
    # the order of the rows is the order of the rules: each helper adds its findings in turn
    rows = _slow_iteration_rows(st, its, slow, con)
    rows += _idle_rows(con, causes, activity, limits, loader, loop=st is not None, on_cpu=on_cpu)
    # launch bound is not said where host work already explains the idle time (the rows so far): where the
    # gaps of its causes hold most of the steady-state idle. The idle between kernels in shorter gaps is no host
    # work's that a finding names, and it is launch bound's headroom (headroom.py)
    host_explained = any(r[0] in ("data-loader bound", "host bound") for r in rows) and _gaps_hold_idle(
        st, causes, limits.host_explains_share
    )
    rows += _steady_state_rows(st, read, host_explained, limits, where)
    rows += _pageable_rows(con, read, limits, where)
    rows += _transfer_rows(con, read, limits, where, pageable_said=bool(rows) and rows[-1][0] == PAGEABLE)
    rows += _tensor_core_rows(con, read, limits, where)
    return pl.DataFrame(rows, schema=["finding", "evidence"], orient="row")


def _gaps_hold_idle(st: dict | None, causes: pl.DataFrame | None, share: float) -> bool:
    """Whether the idle time in gaps >= 1 ms (`causes`, counted over the steady-state iterations where there is a
    loop) is at least `share` of the steady-state iterations' idle time; True where either is unknown."""
    idle = st.get("steady_idle_ns") if st is not None else None
    if not idle or causes is None or not causes.height or causes["counted"][0] != "steady-state iterations":
        return True
    return int(causes["idle_ns"].sum()) >= share * idle


def _slow_iteration_rows(
    st: dict | None, its: pl.DataFrame | None, slow: str | None = None, con=None
) -> list[tuple[str, str]]:
    """The slow-iteration finding, from iteration stats' row (None: no iterations) where it has an outlier
    pattern, with where the outliers' extra time went (slow_phase) and, where the CPU's story of those steps'
    idle gaps names the data loader (`slow`), that the GPU waited for it there."""
    if st is None or not st["outlier_pattern"]:
        return []
    waited = f"; in those steps the GPU waited for the data loader: {slow}" if slow else ""
    return [
        (
            "periodic slow iterations" if "every" in st["outlier_pattern"] else "slow iterations",
            f"{st['outlier_pattern']}; {_typical_median(st, its)}" + slow_phase(its, con=con) + waited,
        )
    ]


def _typical_median(st: dict, its: pl.DataFrame | None) -> str:
    """The median the outlier pattern's ratio is of (iterations.pattern): the steady-state steps that are not
    outliers, on the step's clock; the median of all steady-state steps where the iterations are not at hand."""
    typical = None
    if its is not None and "outlier" in its.columns:
        col = "step_ns" if "step_ns" in its.columns else "wall_ns"
        typical = its.filter(~pl.col("warmup") & ~pl.col("outlier"))[col]
    if typical is None or not typical.len():
        return f"the median step is {_dur(st['median_ns'])}"
    n = typical.len()
    return f"that median is {_dur(typical.median())} (of the {n} step{'s' if n != 1 else ''} that are not outliers)"


def _idle_rows(
    con,
    causes: pl.DataFrame | None,
    activity: str | None,
    limits: Thresholds,
    loader: bool = False,
    loop: bool = False,
    on_cpu: float | None = None,
) -> list[tuple[str, str]]:
    """The idle-time findings (host or data-loader bound, synchronization, allocation, copies): only where the
    idle time in gaps is worth a finding, at least limits.min_idle_pct of the time counted (or no span to
    compare it with). Where there is a loop (`loop`), only about its steady-state steps: idle counted over the
    devices' active span (no gap >= 1 ms in those steps) is start-up or tear-down time, which no step waits on.
    A top cause `unknown` (no NVTX range, CUDA or OS call names the gaps) is host work all the same where the
    scheduling events show the main thread on a CPU for limits.host_share or more of it (`on_cpu`), or the data
    loader where the CPU story names it (`loader`)."""
    if causes is None or not causes.height:
        return []
    in_steps = causes["counted"][0] == "steady-state iterations"
    if loop and not in_steps:
        return []
    span = causes["span_ns"][0]
    if not (not span or 100.0 * causes["idle_ns"].sum() / span >= limits.min_idle_pct):  # no span: always worth it
        return []
    rows: list[tuple[str, str]] = []
    idle = causes["idle_ns"].sum()
    top = causes.row(0, named=True)
    share = top["idle_ns"] / idle if idle else 0
    if top["cause"].startswith("host:") and share >= limits.host_share:
        rng = top["cause"][5:]
        # a PyTorch operator's range is the operator's work, never data loading, whatever its name holds
        named = DATA_WORDS.search(rng) and not run(con, "range_label_pytorch", label=rng)["pytorch"][0]
        kind = "data-loader bound" if named or loader else "host bound"
        rows.append(
            (
                kind,
                f"{share:.0%} of the GPU idle time in gaps >= 1 ms ({_ms(top['idle_ns'])} in {top['gaps']} "
                f"gap{'s' if top['gaps'] != 1 else ''}) is "
                f"spent in {quoted(untitled(rng))} on the CPU" + (f"; meanwhile {activity}" if activity else ""),
            )
        )
    elif (
        top["cause"] == "unknown"
        and share >= limits.host_share
        and activity
        and (loader or (on_cpu or 0) >= limits.host_share)
    ):
        rows.append(
            (
                "data-loader bound" if loader else "host bound",
                f"{share:.0%} of the GPU idle time in gaps >= 1 ms ({_ms(top['idle_ns'])} in {top['gaps']} "
                f"gap{'s' if top['gaps'] != 1 else ''}) has no NVTX range or CUDA call to name it (cause `unknown`); "
                f"meanwhile {activity}",
            )
        )
    for cause, limit, label, advice in (
        ("sync", limits.sync_share, "synchronization bound", "the CPU waits in synchronize calls"),
        (
            "alloc",
            limits.alloc_share,
            "allocation stalls",
            f"cudaMalloc/cudaFree {'inside the loop' if in_steps else 'between the GPU work'}",
        ),
        ("memcpy", limits.sync_share, "copy bound", "the CPU waits in memory copies"),
    ):
        c = causes.filter(pl.col("cause") == cause)
        if c.height and idle and c["idle_ns"][0] / idle >= limit:
            rows.append(
                (
                    label,
                    f"{c['idle_ns'][0] / idle:.0%} of the GPU idle time in gaps >= 1 ms ({_ms(c['idle_ns'][0])}): "
                    f"{advice}",
                )
            )
    return rows


def _steady_state_rows(
    st: dict | None, read: dict[str, pl.DataFrame], host_explained: bool, limits: Thresholds, where: str = ""
) -> list[tuple[str, str]]:
    """The findings on the steady-state iterations' GPU figures (launch bound, exposed communication, GPU
    mostly idle), in that order; none without iteration stats or without a median GPU busy share. `where`: the
    device the launch figures count (_scope)."""
    busy = st["median_gpu_busy_pct"] if st is not None else None
    if busy is None:
        return []
    rows: list[tuple[str, str]] = []
    steady, steady_kernels = st["steady"], st.get("steady_kernels") or 0
    # launch bound rests on the kernels of the loop: none when its steady-state iterations launch no kernel
    if steady_kernels and not host_explained:
        evidence = launch_bound(
            read["launch_figures"].row(0, named=True),
            busy,
            limits.launch_busy_pct,
            limits.empty_queue_share,
            limits.empty_queue_ns,
        )
        if evidence:
            on = f"; kernels on {where}" if where else ""
            rows.append(
                ("launch bound", f"{evidence} (median of {steady}, which launch {steady_kernels:,} kernels{on})")
            )
    exposed = st.get("exposed_comm_pct")
    if exposed is not None and exposed >= limits.exposed_comm_pct:
        rows.append(
            (
                "exposed communication",
                f"{exposed:.0f}% of steady-state wall time has communication kernels running with no compute "
                f"beside them ({st['steady_comm_ns'] / 1e6:,.1f} ms of communication in {steady} iterations): "
                f"{EXPOSED_COMM_ADVICE}",
            )
        )
    if busy < limits.idle_busy_pct:
        rows.append(("GPU mostly idle", f"busy {busy:.0f}% of a steady-state iteration (median of {steady})"))
    return rows


def _pageable_rows(con, read: dict[str, pl.DataFrame], limits: Thresholds, where: str = "") -> list[tuple[str, str]]:
    """The pageable host-to-device copies finding, where they move limits.pageable_min_bytes or more (on
    `where`'s device: _scope)."""
    pc = read["pageable_copies"].row(0, named=True)
    if not (pc["copies"] and (pc["bytes"] or 0) >= limits.pageable_min_bytes):
        return []
    return [
        (
            PAGEABLE,
            f"{pc['copies']:,} copies, {pc['bytes'] / 2**20:,.1f} MiB, {_ms(pc['ns'])} on {where or 'the GPU'}: "
            + _advice.pinned_memory_advice(_facts(con, read)),
        )
    ]


def _transfer_rows(
    con, read: dict[str, pl.DataFrame], limits: Thresholds, where: str = "", pageable_said: bool = False
) -> list[tuple[str, str]]:
    """The transfer-bound finding, where copies between host and device fill limits.host_copy_share or more of a
    device's busy time and move limits.host_copy_min_bytes or more there (on `where`'s device: _scope), its
    figures over the devices where that holds.
    `pageable_said`: the pageable finding is made, so its advice is not given twice."""
    hc = read.get("host_copies")
    if hc is None or not hc.height:
        return []
    held = hc.filter(
        (pl.col("filled_ns") > 0)
        & (pl.col("filled_ns") >= limits.host_copy_share * pl.col("busy_ns"))
        & (pl.col("bytes") >= limits.host_copy_min_bytes)
    )
    if not held.height:
        return []
    shares = [round(100 * r["filled_ns"] / r["busy_ns"]) for r in held.iter_rows(named=True)]
    devices = held["device_id"].to_list()
    if hc.height == 1 and not where:  # one GPU in the profile
        whose = f"{shares[0]}% of the GPU's busy time"
    elif where.startswith("GPU "):  # the loop's device alone (_scope), which `where` names
        whose = f"{shares[0]}% of the busy time of {where}"
    else:
        whose = " and ".join(f"{pct}% of GPU {d}'s busy time" for d, pct in zip(devices[:4], shares))
        if len(devices) > 4:
            whose = f"{min(shares)}% to {max(shares)}% of the busy time of GPUs {_list(devices)}"
    copies, to_device, nbytes, ns = (held[c].sum() for c in ("copies", "to_device", "bytes", "copy_ns"))
    filled, busy = held["filled_ns"].sum(), held["busy_ns"].sum()
    exposed = _exposed_copies(con, devices)
    rate = f" ({nbytes / ns:,.1f} GB/s)" if ns else ""
    evidence = (
        f"copies between host and device memory fill {whose} ({_dur(filled)} of {_dur(busy)}): {copies:,} copies "
        f"({to_device:,} to the device, {copies - to_device:,} from it) move {_size(nbytes)} in {_dur(ns)} of GPU "
        f"time{rate}, and {_dur(exposed)} of their time ({exposed / filled:.0%}) has no kernel beside it; "
    )
    pageable, pinned = held["pageable_bytes"].sum(), held["pinned_bytes"].sum()
    if nbytes and pageable * 2 >= nbytes:
        lead = f"{pageable / nbytes:.0%} of their bytes are in pageable host memory: "
        advice = (
            f"the finding `{PAGEABLE}` says how to pin it"
            if pageable_said
            else _advice.pinned_memory_advice(_facts(con, read))
        )
        return [("transfer bound", evidence + lead + advice)]
    kind = (
        f"{pinned / nbytes:.0%} of their bytes are in pinned host memory; " if nbytes and pinned * 2 >= nbytes else ""
    )
    if exposed * 2 >= filled:
        return [("transfer bound", evidence + kind + _advice.copy_overlap_advice(_facts(con, read)))]
    # mostly beside kernels: the exposed rest is the headroom (what overlapping could hide), so the advice says how
    return [("transfer bound", evidence + kind + (_advice.HIDE_REST if exposed else _advice.COPY_LESS))]


def _exposed_copies(con, devices: list[int]) -> int:
    """The time in which copies between host and device ran on `devices` with no kernel beside them, ns
    (host_copies_exposed.sql, which reads every kernel of the devices it is asked of: asked only here)."""
    got = run(con, "host_copies_exposed", device_id=devices[0] if len(devices) == 1 else None)
    return int(got.filter(pl.col("device_id").is_in(devices))["exposed_ns"].sum())


def _size(nbytes) -> str:
    """Bytes in the binary unit that keeps their digits: 47.5 GiB, 12.0 MiB."""
    return f"{nbytes / 2**30:,.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"


def _tensor_core_rows(con, read: dict[str, pl.DataFrame], limits: Thresholds, where: str = "") -> list[tuple[str, str]]:
    """The matrix-math-without-tensor-cores finding, where such kernels hold limits.no_tensor_core_pct or more
    of all kernel time (on `where`'s device: _scope) and a GPU that ran kernels has tensor cores."""
    cats = read.get("kernel_categories")
    if cats is None or not cats.height:
        return []
    simt = cats.filter(pl.col("category").is_in(MATRIX_CATEGORIES) & (pl.col("tensor_cores") == "no"))
    pct = simt["pct"].sum() if simt.height else 0.0
    advice = _advice.tensor_core_advice(_facts(con, read)) if pct >= limits.no_tensor_core_pct else None
    if not advice:  # None: no GPU that ran them has tensor cores
        return []
    return [
        (
            "matrix math without tensor cores",
            f"{pct:.0f}% of kernel time ({_ms(simt['total_ns'].sum())}) is in "
            f"{'/'.join(sorted(simt['category'].unique()))} kernels on CUDA cores "
            f"{_tc_evidence(simt, tensor_metric(read.get('activity_names')))}"
            f"{f', counted on {where}' if where else ''}; " + advice,
        )
    ]


def _facts(con, read: dict) -> _advice.Facts:
    """What the advice rests on: compute capabilities and frameworks (advice.py), from `read` when given."""
    return _advice.facts(con, read.get("advice_facts"))


def tensor_metric(names: pl.DataFrame | None, device_id: int | None = None) -> str:
    """What the tensor counter of `names` (activity_names.sql's rows; of `device_id` alone where given) is called:
    `Tensor Active`, or Turing's `Tensor Active / FP16 Active`, which counts the fp16 pipe too and so is named as
    it is; several devices' different names joined with ` or `."""
    if names is None or not names.height:
        return "Tensor Active"
    mine = names.filter(pl.col("tensor") & (True if device_id is None else pl.col("device_id") == device_id))
    return " or ".join(sorted(set(mine["metric"].to_list()))) or "Tensor Active"


def tensor_metric_of(con) -> str:
    """tensor_metric of every device of the export whose canonical tables `con` holds."""
    return tensor_metric(run(con, "activity_names", device_id=None))


def _tc_evidence(rows: pl.DataFrame, tensor: str = "Tensor Active") -> str:
    """How the tensor-core verdict of these kernels_by_category rows was reached (their `evidence`); `tensor`:
    what the devices' tensor counter is called (tensor_metric)."""
    kinds = set("+".join(rows["evidence"].to_list()).split("+")) if "evidence" in rows.columns else {"name"}
    by_metrics = (
        f"by GPU metrics ({tensor} under 1% while SMs Active was 50% or more, in the samples taken while "
        "they ran alone on their GPU)"
    )
    if kinds == {"metrics"}:
        return by_metrics
    if "metrics" in kinds:
        return f"{by_metrics} and by name"
    return "by name"


def launch_bound(
    figures: dict,
    busy_pct: float,
    max_busy_pct: float = LAUNCH_BUSY_PCT,
    empty_queue_share: float = EMPTY_QUEUE_SHARE,
    empty_queue_ns: int = EMPTY_QUEUE_NS,
) -> str | None:
    """The launch-bound finding's evidence, or None when the rule does not hold. `figures`: a row of
    launch_figures.sql (made with the same `empty_queue_ns`); `busy_pct`: the median steady-state GPU busy. The
    GPU idles between kernels (busy < max_busy_pct) while the queue is empty (>= empty_queue_share of kernels
    start within empty_queue_ns of their launch call returning) and launches are slower than the kernels: the
    median launch call, or the median time from one launch call to the process's next (the CPU's time per kernel,
    its framework's work between launches included), takes longer than the median kernel."""
    n = figures["kernels"]
    if not n or busy_pct >= max_busy_pct:
        return None
    share = figures["empty_queue"] / n
    api, kernel = figures["api_med_ns"], figures["kernel_med_ns"]
    every = figures.get("interval_med_ns")
    if share < empty_queue_share or not (api > kernel or (every is not None and every > kernel)):
        return None
    pace = (
        f"a launch call takes {api / 1000:,.1f} us (median)"
        if api > kernel or every is None
        else f"the CPU launches a kernel every {every / 1000:,.1f} us (median; {api / 1000:,.1f} us of it in the "
        "launch call)"
    )
    return (
        f"{share:.0%} of {n:,} kernels start within {empty_queue_ns / 1000:g} us of their launch call returning "
        f"(empty queue), {pace} against {kernel / 1000:,.1f} us for a kernel, and the GPU is busy {busy_pct:.0f}% "
        "of a steady-state iteration"
    )
