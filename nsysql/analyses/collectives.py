"""NCCL collectives by their NVTX payloads: per call, per group, across ranks, and the slow-size finding.

Per call (queries/v1/analyses/collectives.sql): kind, message size, reduction op or root, communicator and its
ranks, the kernels the call launched and their GPU time, algorithm and bus bandwidth (NCCL's factors; the rules
are in the SQL file's header).

Groups (`by`): `size` (kind and message size), `kind`, `iteration` (the loop `iterations` finds; a call belongs
to the iteration its NVTX range starts in), `rank` (several exports): calls, bytes, GPU time, and the bus
bandwidth's median, p10 and p90 over the calls that have one.

Across ranks (`skew`): NCCL runs the calls of one communicator in the same order on every rank, so the k-th call
of a communicator in each export is one collective instance. Each rank arrives when its kernel starts on its
GPU; the rank that arrived last held the others, for the skew (last start - first start). Each export counts
time from its own session's zero: starts are compared on the UTC clock (session_clock), as far as the hosts'
clocks agree (the ranks of one host share one; across hosts they may differ by more than the skew). Where an
export does not say when its session started, by the kernels' GPU times (`clock` says which): an instance ends
together on every rank, so a rank arrived its GPU time before the end, and the skew is the longest GPU time less
the shortest.

Slow-size rule (SLOW_RULE, the finding): among the calls of one kind and message size with a GPU time (at
least MIN_CALLS of them), a call is slow when its bus bandwidth (its algorithm bandwidth where the communicator's
size is unknown: the same factor scales all calls of one kind and size) is below `slow_ratio` (default 0.5) x the
median of that kind and size. The time it would give back is its GPU time beyond the group's median GPU time.
No finding where no group has MIN_CALLS calls, or none is slow.
"""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ..loader import REEXPORT_BLOBS as REEXPORT
from ._names import said_bytes
from ._sql import run

GROUPINGS = ("call", "size", "kind", "iteration", "rank")
SLOW_RATIO = 0.5
MIN_CALLS = 3
NO_PAYLOADS = (
    "the export lacks NVTX payload bytes (NVTX_EVENTS.binaryData), which hold NCCL's message sizes; "
    f"export the report again with them: `{REEXPORT}`"
)
NO_NCCL = "no NCCL collectives in this profile (no NCCL kernel, no NVTX range of NCCL's domain)"
NO_NCCL_RANGES = "no NVTX range of NCCL's domain in this profile: no NCCL call to measure"
# no NCCL range, and no GPU activity recorded at all: the absence of NCCL kernels is no evidence
UNTRACED = (
    "no NVTX range of NCCL's domain in this profile, and no GPU activity was recorded at all, so whether NCCL ran "
    "cannot be told (NCCL's calls and kernels need `nsys profile -t cuda,nvtx`)"
)
UNNAMED_KERNELS = (
    "{kernels:,} NCCL kernels ran ({ms:,.2f} ms of GPU time), but no NVTX range of NCCL's domain names their calls "
    "and message sizes (NCCL writes them when nsys traces NVTX, `-t nvtx`, and NCCL_NVTX_DISABLE is unset): "
    "`nsysql overlap` and `nsysql kernels --by category` measure their GPU time"
)
NO_SCHEMAS = (
    "NCCL's NVTX ranges here carry no payloads (the export declares no NVTX payload schema): this NCCL names its "
    "calls without their sizes, so no collective can be measured"
)
NO_SIZES = "NCCL ranges here carry no message size in their payloads, so no collective can be measured"


# what a profile whose NCCL ranges carry no message size lacks for bandwidth, by why_not's reason
UNSIZED = {
    NO_NCCL_RANGES: "no NVTX range of NCCL's domain names the calls and their sizes (NCCL writes them when nsys "
    "traces NVTX, `-t nvtx`, NCCL_NVTX_DISABLE unset, and the export keeps their payloads: "
    f"`{REEXPORT}`)",
    NO_PAYLOADS: NO_PAYLOADS,
    NO_SCHEMAS: "NCCL's NVTX ranges here carry no payloads (the export declares no NVTX payload schema): this NCCL "
    "names its calls without their sizes",
}


def slow_rule(ratio: float) -> str:
    return (
        f"a call is slow when its bus bandwidth (algorithm bandwidth where the communicator's size is unknown) is "
        f"below {ratio:.0%} of the median of the calls of its kind and "
        f"message size (groups of {MIN_CALLS} or more calls); it would give back its GPU time beyond the group's median"
    )


def calls(con) -> pl.DataFrame:
    """One row per collective call (collectives.sql); raises NsysqlError saying why there is none."""
    df = run(con, "collectives")
    if df.height:
        return df
    raise NsysqlError(why_none(con))


def why_none(con) -> str:
    """Why a profile has no measured collective (why_not, from the canonical tables)."""
    nccl, payloads, missing, kernels, kernel_ns, gpu_ops, decoded, damaged = run(con, "collectives_missing").row(0)
    if not nccl and not gpu_ops:
        return UNTRACED
    if why := why_not(nccl, payloads, missing, kernels, kernel_ns):
        return why
    return f"{undecoded(payloads, damaged)}, so no collective can be measured" if not decoded else NO_SIZES


def undecoded(payloads: int, damaged: int, who: str = "NCCL's ranges carry") -> str:
    """Why events that carry payloads (`who`: "NCCL's ranges carry") yield nothing where not one of the payloads
    decodes: how many have a damaged header (`damaged`), and how many a schema the export does not declare or
    bytes that end early (the rest: nvtx_payloads tells the two apart by no column, so neither is claimed alone)."""
    why = []
    if damaged:
        why.append(f"{damaged:,} with a header that promises more than the event's bytes hold")
    if payloads - damaged:
        why.append(
            f"{payloads - damaged:,} with a schema that NVTX_PAYLOAD_SCHEMAS does not declare, or bytes that end "
            "before the payload does"
        )
    return f"{who} payloads, but none that can be decoded ({'; '.join(why)})"


def refusal(con) -> str | None:
    """Why `nsysql collectives` (collectives_shown, by size) has nothing to answer: neither NCCL calls with a
    message size nor NCCL kernels to group by their names (why_none, as collective_calls raises it); or None."""
    nccl, payloads, missing, kernels, kernel_ns, *_ = run(con, "collectives_missing").row(0)
    if why_not(nccl, payloads, missing, kernels, kernel_ns) is None or kernels:
        return None
    return why_none(con)


def unsized(con) -> str | None:
    """Why the profile's NCCL calls have no message size (payloads left out of the export, none written, none
    that decodes, or no NCCL range) where NCCL kernels ran; None where NCCL ranges carry payloads that decode, or
    no NCCL kernel ran."""
    nccl, payloads, missing, kernels, kernel_ns, _, decoded, damaged = run(con, "collectives_missing").row(0)
    why = why_not(nccl, payloads, missing, kernels, kernel_ns)
    if not kernels:
        return None
    if why is None:  # payloads, of which not one decodes: no size, as where there are none
        return undecoded(payloads, damaged) if not decoded else None
    return UNSIZED.get(NO_NCCL_RANGES if not nccl else why)


def by_kernel_name(con) -> pl.DataFrame:
    """Per collective kind, told by the NCCL kernels' names (collectives_kernels.sql): the calls NCCL's ranges
    name (NULL without them), kernels, their GPU time (gpu_ns) and median (med_gpu_ns)."""
    return run(con, "collectives_kernels")


def unsized_note(df: pl.DataFrame, why: str) -> str:
    """The line under by_kernel_name's table: what it is drawn from, and why no size or bandwidth is."""
    return (
        f"{df['kernels'].sum():,} NCCL kernels, by kind from their names ({df['gpu_ns'].sum() / 1e6:,.2f} ms of GPU "
        f"time); message sizes and bandwidth need NCCL's NVTX payloads: {why}"
    )


def why_not(
    nccl_ranges: int, nccl_payloads: int, missing: list[str], kernels: int | None = None, kernel_ns: int = 0
) -> str | None:
    """None when NCCL ranges carry payloads; else why not: no NCCL ranges (with the NCCL kernels that ran anyway,
    where `kernels` counts them: a profile without ranges may still have run collectives); payload bytes left out
    of the export (the loader's `missing` fact: schemas declared, no bytes), with the re-export command; or no
    payloads at all (NCCL then annotates its calls by name only: re-exporting would not help)."""
    if not nccl_ranges:
        if kernels:
            return UNNAMED_KERNELS.format(kernels=kernels, ms=(kernel_ns or 0) / 1e6)
        return NO_NCCL if kernels == 0 else NO_NCCL_RANGES
    if nccl_payloads:
        return None
    if any(m.startswith("no NVTX_EVENTS.binaryData") for m in missing):
        return NO_PAYLOADS
    return NO_SCHEMAS


def _bandwidths(group: list[str]) -> list[pl.Expr]:
    bw = pl.col("busbw_gbps")
    return [
        pl.len().alias("calls"),
        # unknown (NULL) where a call's whole is: an all-gather's or reduce-scatter's per-rank count times the
        # communicator's ranks, where the export does not say how many (no `ncclCommInitRank*` range)
        pl.when(pl.col("data_bytes").null_count() == 0).then(pl.col("data_bytes").sum()).alias("bytes"),
        # unknown (NULL) where a call has no GPU time of its own (made between ncclGroupStart and ncclGroupEnd)
        pl.when(pl.col("gpu_ns").null_count() == 0).then(pl.col("gpu_ns").sum()).alias("gpu_ns"),
        pl.col("gpu_ns").median().alias("med_gpu_ns"),
        bw.median().alias("busbw_med_gbps"),
        bw.quantile(0.1, "linear").alias("busbw_p10_gbps"),
        bw.quantile(0.9, "linear").alias("busbw_p90_gbps"),
        pl.col("algbw_gbps").median().alias("algbw_med_gbps"),
    ]


def grouped(df: pl.DataFrame, by: str) -> pl.DataFrame:
    """Calls, bytes, GPU time and bandwidths per group of `df` (calls, with `iteration` or `rank` when by asks)."""
    keys = {"size": ["kind", "bytes"], "kind": ["kind"], "iteration": ["iteration"], "rank": ["rank"]}[by]
    if by == "size":  # the group's message size, not its total
        df = df.rename({"bytes": "size"})
        keys = ["kind", "size"]
    return df.group_by(keys).agg(_bandwidths(keys)).sort(keys, nulls_last=True)


def by_iteration(df: pl.DataFrame, iterations: pl.DataFrame) -> pl.DataFrame:
    """`df` with the iteration each call's NVTX range starts in (NULL outside every iteration)."""
    win = iterations.select("iteration", pl.col("start_ns").alias("it_start"), "wall_ns").sort("it_start")
    out = df.sort("start_ns").join_asof(win, left_on="start_ns", right_on="it_start", strategy="backward")
    inside = pl.col("start_ns") < pl.col("it_start") + pl.col("wall_ns")
    return out.with_columns(pl.when(inside).then(pl.col("iteration")).alias("iteration")).drop("it_start", "wall_ns")


def slow_calls(df: pl.DataFrame, ratio: float = SLOW_RATIO) -> pl.DataFrame:
    """The calls the slow-size rule flags, each with its group's median bandwidth (`group_busbw_gbps`) and GPU
    time and the time it would give back (`extra_ns`). A group whose calls all have a bus bandwidth is judged by
    it; one where the communicator's size is unknown (no `ncclCommInitRank*` range in the export: profiling began
    after NCCL's init), by the algorithm bandwidth (`bw` names which): the calls of one kind and size share one
    bus bandwidth factor, so both flag the same calls."""
    has = df.filter(pl.col("algbw_gbps").is_not_null())
    bus = pl.col("busbw_gbps").null_count().over("kind", "bytes") == 0
    has = has.with_columns(
        pl.when(bus).then(pl.col("busbw_gbps")).otherwise(pl.col("algbw_gbps")).alias("_bw"),
        pl.when(bus).then(pl.lit("bus")).otherwise(pl.lit("algorithm")).alias("bw"),
    )
    med = has.group_by("kind", "bytes").agg(
        pl.len().alias("group_calls"),
        pl.col("_bw").median().alias("group_busbw_gbps"),
        pl.col("gpu_ns").median().alias("group_gpu_ns"),
    )
    out = has.join(med.filter(pl.col("group_calls") >= MIN_CALLS), on=["kind", "bytes"])
    out = out.filter(pl.col("_bw") < ratio * pl.col("group_busbw_gbps"))
    return out.with_columns((pl.col("gpu_ns") - pl.col("group_gpu_ns")).cast(pl.Int64).alias("extra_ns")).drop("_bw")


def finding(df: pl.DataFrame, ratio: float = SLOW_RATIO) -> str | None:
    """One sentence per kind and size with slow calls (largest time first), or None where the rule flags none."""
    slow = slow_calls(df, ratio)
    if not slow.height:
        return None
    parts = []
    worst = pl.when(pl.col("bw") == "bus").then(pl.col("busbw_gbps")).otherwise(pl.col("algbw_gbps"))
    groups = slow.group_by("kind", "bytes", "bw", "group_calls", "group_busbw_gbps", "group_gpu_ns").agg(
        pl.len().alias("n"), pl.col("extra_ns").sum().alias("extra_ns"), worst.max().alias("worst")
    )
    unknown = (
        " (not bus bandwidth: that needs the communicator's rank count, which the export does not give, having "
        "traced no ncclCommInitRank call)"
    )
    for g in groups.sort("extra_ns", descending=True).iter_rows(named=True):
        parts.append(
            f"{g['n']} of {g['group_calls']} {g['kind']} calls of {said_bytes(g['bytes'])} ran at {g['worst']:.3g} GB/s "
            f"{g['bw']} bandwidth or less{unknown if g['bw'] != 'bus' else ''}, below {ratio:.0%} of that size's "
            f"median {g['group_busbw_gbps']:.3g} GB/s: "
            f"{g['extra_ns'] / 1e6:.3g} ms of GPU time in all beyond that size's median of "
            f"{g['group_gpu_ns'] / 1e6:.3g} ms a call (a call's GPU time includes waiting for the other ranks: "
            "`nsysql collectives` over every rank's export says who arrived last)"
        )
    return "; ".join(parts)


def unjudged(df: pl.DataFrame) -> str | None:
    """Which calls the rule could not judge, having no GPU time of their own; None where every call has one."""
    n = int(df["gpu_ns"].is_null().sum())
    if not n:
        return None
    return (
        f"{n} of {df.height} calls launched no kernel inside their own range, so the rule cannot judge them "
        "(NCCL launches the kernels of calls made between ncclGroupStart and ncclGroupEnd at ncclGroupEnd; or the "
        "export traced no CUDA kernels)"
    )


def findings(df: pl.DataFrame, ratio: float = SLOW_RATIO) -> pl.DataFrame:
    """One row: `finding`, `slow_calls`, `extra_ms` (their GPU time beyond their groups' medians: the time fixing
    them would give back), `evidence` (NULL when the rule flags none), `unjudged` (the calls without GPU time,
    which it cannot judge; NULL when none) and `rule`."""
    slow = slow_calls(df, ratio)
    return pl.DataFrame(
        {
            "finding": ["slow collectives"],
            "slow_calls": [slow.height],
            "extra_ms": [slow["extra_ns"].sum() / 1e6],
            "evidence": [finding(df, ratio)],
            "unjudged": [unjudged(df)],
            "rule": [slow_rule(ratio)],
        },
        schema={
            "finding": pl.String,
            "slow_calls": pl.Int64,
            "extra_ms": pl.Float64,
            "evidence": pl.String,
            "unjudged": pl.String,
            "rule": pl.String,
        },
    )


def findings_said(found: pl.DataFrame) -> list[str]:
    """The lines said under the collectives' table of one export (`findings`' one row in words): the slow-size
    rule's evidence, or that it flags none, with the calls it cannot judge; then the rule itself."""
    row = found.row(0, named=True)
    said = row["evidence"] or ("none among the calls with a GPU time" if row.get("unjudged") else "none")
    also = f"; {row['unjudged']}" if row.get("unjudged") else ""
    return [f"slow collectives: {said}{also}", f"rule: {row['rule']}"]


def skew(stacked: pl.DataFrame) -> pl.DataFrame:
    """One row per collective instance across ranks (`stacked`: calls with a `rank` column, one export each):
    its communicator, sequence number, kind, size, how many ranks have it, the rank that arrived last and the
    skew (ns from the first rank's kernel start to the last's)."""
    # one clock: UTC (each export's session zero + its times) where every export says when it started. Else no
    # clock is shared (each export counts from its own session's zero), but a collective ends together on every
    # rank, when the last one has joined: each rank arrived its kernel time before that end, so arrivals are
    # compared as minus the GPU time (`duration`), the rank with the shortest kernel being the last
    utc = stacked["gpu_start_utc_ns"].is_not_null().sum() == stacked["gpu_start_ns"].is_not_null().sum()
    df = stacked.filter(pl.col("gpu_start_ns").is_not_null()).with_columns(
        pl.col("call").rank("ordinal").over("rank", "comm").cast(pl.Int64).sub(1).alias("seq"),
        (pl.col("gpu_start_utc_ns") if utc else -pl.col("gpu_ns")).alias("arrival_ns"),
    )
    first = pl.col("arrival_ns").min() if utc else pl.lit(None, pl.Int64)
    return (
        df.sort("arrival_ns")
        .group_by("comm", "seq")
        .agg(
            pl.col("kind").first(),
            pl.col("bytes").first(),
            # the iteration of the loop each rank was in (the ranks' loops are numbered alike)
            pl.col("iteration").min() if "iteration" in df.columns else pl.lit(None, pl.Int64).alias("iteration"),
            pl.col("kind").n_unique().alias("kinds"),
            pl.len().alias("ranks_seen"),
            pl.col("rank").last().alias("last_rank"),
            pl.col("rank").first().alias("first_rank"),
            (pl.col("arrival_ns").max() - pl.col("arrival_ns").min()).alias("skew_ns"),
            first.alias("first_arrival_ns"),
            pl.lit("utc" if utc else "duration").alias("clock"),
        )
        .filter((pl.col("ranks_seen") > 1) & (pl.col("kinds") == 1))
        .drop("kinds")
        .sort("first_arrival_ns" if utc else ["comm", "seq"])
    )


def skew_by_rank(inst: pl.DataFrame) -> pl.DataFrame:
    """Per rank: the instances it arrived last at, and the others' wait for it (the skews of those instances)."""
    return (
        inst.group_by(pl.col("last_rank").alias("rank"))
        .agg(
            pl.len().alias("last_arrivals"),
            pl.col("skew_ns").sum().alias("held_others_ns"),
            pl.col("skew_ns").max().alias("max_skew_ns"),
        )
        .sort("held_others_ns", descending=True)
    )


# how arrivals were compared (skew's `clock`), as skew_sentence says it
CLOCKS = {
    "utc": "kernel starts on the UTC clock of each export's session; across hosts, as far as their clocks agree",
    "duration": "an export does not say when its session started, so arrivals are told by the kernels' GPU times: "
    "a collective ends together on every rank, the last to arrive having the shortest kernel",
}


def skew_sentence(inst: pl.DataFrame, by_rank: pl.DataFrame) -> str:
    """The skew across ranks in one line (`inst`: skew's instances; `by_rank`: skew_by_rank's, the rank that held
    the others longest first): how many instances matched, their median and largest skew, that rank, and the
    clock the arrivals were compared on."""
    if not inst.height:
        return "skew: no collective instance is in more than one of these exports"
    top = by_rank.row(0, named=True)
    return (
        f"skew: {inst.height} collective instances matched across ranks (the k-th call of each communicator), "
        f"median start skew {_dur(inst['skew_ns'].median())}, max {_dur(inst['skew_ns'].max())}; "
        f"rank {top['rank']} arrived last at {top['last_arrivals']} of them, holding the others "
        f"{top['held_others_ns'] / 1e6:.4g} ms in all ({CLOCKS[inst['clock'][0]]})"
    )


def _dur(ns: float) -> str:
    """A skew as people read it: ms with two decimals from a millisecond, else us (never 3.566e+04 us)."""
    return f"{ns / 1e6:,.2f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} us"
