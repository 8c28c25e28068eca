"""Many ranks at once: per-rank step time, idle and collective time, and stragglers named with evidence.

Per rank (`rank_tables`, run where the export is, on a local process or a Dask worker): the iterations frame
reduced to what the cross-rank analysis needs, idle time by cause, and NCCL time. Only these small frames
(a few KB per rank) travel; the reduction (`per_rank`, `by_iteration`, `stragglers`) runs in DuckDB over all
ranks' frames at once.

Straggler rule (RULE, printed with the answer): with T = max(1 ms, 25% of the median steady-state iteration
time over all ranks), rank r is a straggler in iteration i when
- its iteration time in i exceeds its own steady-state median by at least max(T, 5 x the median absolute
  deviation (MAD) of its own steady-state iteration times): it was slow beyond its own noise,
- its own GPU idle time in i exceeds its steady-state median by at least T: its GPU waited on its CPU side, and
- some other rank's collective (NCCL) kernel time grows over its own median, in iteration i or i+1, by at
  least max(half that excess idle, 5 x the MAD of its own collective time): the others waited for r inside the
  collective, beyond their own noise.
The CPU-side cause is the cause of r's largest idle gap in i (e.g. `host:data`, with the OS call in flight).
What a straggler cost the job is the others' extra time in collectives it caused, summed over its iterations;
the sentences come in that order, costliest first.
"""

from __future__ import annotations

import polars as pl

from .. import queries
from ..errors import NsysqlError
from . import gaps as _gaps
from ._names import some_of
from ._sql import frame, run

MIN_EXCESS_NS = 1_000_000
EXCESS_SHARE = 0.25
WAIT_SHARE = 0.5
NOISE_K = 5  # x the median absolute deviation of the rank's own steady-state iterations
RULE = (
    f"with T = max({MIN_EXCESS_NS / 1e6:g} ms, {EXCESS_SHARE:.0%} of the median step), a rank straggles in a "
    f"step that is longer than its own median step by at least max(T, {NOISE_K} x the MAD of its own steps), "
    "in which its GPU idles at least T more than its median, and in which (or in the next) another rank's "
    f"collective time grows by at least max({WAIT_SHARE:.0%} of that idle, {NOISE_K} x the MAD of its own); "
    "stragglers are listed by the wait they cost the others"
)


def rank_info(path: str, f: dict[str, list[str]]) -> dict:
    """What number_ranks reads of one export: its path and the RANK its facts `f` name (and where from), and
    the processes with GPU work it holds where `f` has them (with_gpu_processes: `nsysql ranks` reads them;
    None where not read)."""
    rank, source = (f.get("rank") or [None])[0], (f.get("rank_source") or [None])[0]
    procs = f.get("gpu_processes")
    named = f.get("mpi_ranks") or []
    if rank is None and procs is not None and len(procs) == 1 and len(named) == 1:
        # a file of one rank's process, without RANK in its environment: the rank nsys's MPI trace names
        rank, source = named[0], f"its thread named `MPI Rank {named[0]}` by nsys's MPI trace"
    return {
        "path": path,
        "rank_in_file": int(rank) if rank is not None else None,
        "rank_source": source,
        "nsys_version": (f.get("nsys_version") or [None])[0],
        "gpu_processes": len(procs) if procs is not None else None,
        "gpu_process_list": some_of(procs) if procs is not None else None,
    }


def with_gpu_processes(con, f: dict[str, list[str]]) -> dict[str, list[str]]:
    """The facts `f`, `gpu_processes`: each process with GPU work, busiest first, as 'process P on GPU D', or
    'process P (MPI rank N) on GPU D' where its thread names its rank, and `mpi_ranks`: the ranks so named
    (ranks_processes.sql). One export may hold several ranks (one `nsys profile` over mpirun or torchrun):
    number_ranks says so, as each export counts as one rank."""
    procs = run(con, "ranks_processes")
    said = [
        f"process {p}{'' if r is None else f' (MPI rank {r})'} on GPU {d}"
        for p, d, r in procs.select("pid", "device_id", "mpi_rank").iter_rows()
    ]
    return {**f, "gpu_processes": said, "mpi_ranks": [str(r) for r in procs["mpi_rank"].drop_nulls()]}


def nccl(con) -> pl.DataFrame:
    """The profile's NCCL ranges: name, start_ns, duration_ns (nccl_ranges.sql)."""
    return frame(con, queries.read("analyses/nccl_ranges.sql"))


def rank_tables(
    path: str,
    f: dict[str, list[str]],
    its: pl.DataFrame | NsysqlError,
    family: str | None = None,
    gaps: pl.DataFrame | None = None,
    causes: pl.DataFrame | None = None,
    nccl: pl.DataFrame | None = None,
    device: int | None = None,
    loop_pid: int | None = None,
) -> dict[str, pl.DataFrame]:
    """The small per-rank frames the cross-rank analysis reads, from one profile's answers (the driver,
    nsysql.many, asks them of its Profile): `f`, its facts; `its`, its iterations, or why it has none; with
    iterations, `family` (the iteration range's name), the gaps indexed by them, idle time by cause
    (Profile.gaps(by="cause")) and `nccl`, NCCL's ranges, counted per iteration they start in (as the other
    per-rank figures, over the loop's iterations: not NCCL's set-up and tear-down). `device`: the loop's
    device (iteration_stats), whose gaps alone count where the export holds several devices' (one export of
    several processes: the others idle in parallel, on loops of their own); `loop_pid`: the process whose loop
    that is, which the note on a file of several processes names (number_ranks)."""
    info = pl.DataFrame([rank_info(path, f) | {"loop_pid": loop_pid}])
    out = {"info": info}
    if isinstance(its, NsysqlError):
        out["info"] = info.with_columns(problem=pl.lit(str(its)))
        return out
    if device is not None and gaps["device_id"].n_unique() > 1:
        gaps = gaps.filter(pl.col("device_id") == device)
        if _gaps.steady_only(gaps):  # else by_cause counts every device's active span: left as given
            causes = _gaps.by_cause(None, gaps, its=its)
    top = (
        gaps.filter(pl.col("iteration").is_not_null())
        .sort("duration_ns", descending=True)
        .group_by("iteration", maintain_order=True)
        .first()
        .select("iteration", pl.col("cause").alias("top_cause"), pl.col("duration_ns").alias("top_gap_ns"), "os_call")
    )
    out["iterations"] = (
        its.select(
            "iteration",
            "name",
            "start_ns",
            "end_ns",
            "wall_ns",
            "gpu_busy_ns",
            "idle_ns",
            "collective_ns",
            "comm_ns",
            "exposed_comm_ns",
            "kernel_ns",
            "warmup",
            "outlier",
        )
        .join(top, on="iteration", how="left")
        .join(_nccl_per_iteration(its, nccl), on="iteration", how="left")
        .with_columns(pl.col("nccl_ranges").fill_null(0), pl.col("nccl_range_ns").fill_null(0), range=pl.lit(family))
    )
    out["causes"] = causes.select("cause", "gaps", "idle_ns")
    return out


def _nccl_per_iteration(its: pl.DataFrame, nccl: pl.DataFrame | None) -> pl.DataFrame:
    """Per iteration: the NCCL ranges that start in its window (`nccl_ranges`) and their CPU-side time."""
    schema = {"iteration": its.schema["iteration"], "nccl_ranges": pl.Int64, "nccl_range_ns": pl.Int64}
    if nccl is None or nccl.height == 0:
        return pl.DataFrame(schema=schema)
    win = its.select("iteration", pl.col("start_ns").alias("it_start"), pl.col("end_ns").alias("it_end"))
    placed = (
        nccl.sort("start_ns")
        .join_asof(win.sort("it_start"), left_on="start_ns", right_on="it_start", strategy="backward")
        .filter(pl.col("start_ns") < pl.col("it_end"))
    )
    return (
        placed.group_by("iteration")
        .agg(
            pl.len().cast(pl.Int64).alias("nccl_ranges"),
            pl.col("duration_ns").sum().cast(pl.Int64).alias("nccl_range_ns"),
        )
        .select(schema.keys())
        .cast(schema)
    )


def combine(parts: list[tuple[int, dict[str, pl.DataFrame]]]) -> dict[str, pl.DataFrame]:
    """Stack per-rank frames, adding a `rank` column."""
    out: dict[str, list[pl.DataFrame]] = {}
    for rank, tables in parts:
        for name, df in tables.items():
            out.setdefault(name, []).append(df.with_columns(rank=pl.lit(rank, pl.Int64)))
    return {k: pl.concat(v, how="diagonal_relaxed") for k, v in out.items()}


def number_ranks(infos: list[dict]) -> tuple[list[int], str]:
    """Rank numbers from the files (RANK in the captured environment) when every file has a distinct one,
    else by sorted file name, the numbers in names in numeric order (`rank2` before `rank10`); and a sentence
    saying which."""
    found = [i.get("rank_in_file") for i in infos]
    if all(r is not None for r in found) and len(set(found)) == len(found):
        src = sorted({i.get("rank_source") or "the file" for i in infos})
        env = all("environment" in s or s == "TARGET_INFO_SYSTEM_ENV" for s in src)
        what = "ranks from RANK in each file" if env else "ranks as each file names them"
        return found, f"{what} ({', '.join(src)})" + _several_per_file(infos)
    order = sorted(range(len(infos)), key=lambda k: _natural(infos[k]["path"]))
    ranks = [0] * len(infos)
    for r, k in enumerate(order):
        ranks[k] = r
    why = "ranks numbered by sorted file name"
    if any(r is not None for r in found):
        why += " (RANK missing or repeated in some files)"
    return ranks, why + _several_per_file(infos)


def _natural(path: str) -> list:
    """A file name's sort key with its runs of digits compared as numbers: `r2.sqlite` before `r10.sqlite`, as
    a job's ranks are named."""
    import re

    return [(0, int(t), t) if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", path) if t]


def rank_sources(infos: list[dict], numbers: list[int]) -> list[str]:
    """Where each file's rank number (number_ranks' `numbers`) came from, for the files table: the file's own
    source where number_ranks took the files' ranks, else the sorted file names, with the rank the file named
    and why it went unused (another file repeats it, or names none): never a source the number did not come from."""
    if numbers == [i.get("rank_in_file") for i in infos]:
        return [i.get("rank_source") or "the file" for i in infos]
    return [
        "sorted file name"
        + (
            ""
            if i.get("rank_in_file") is None
            else f" (the file names rank {i['rank_in_file']}, from {i.get('rank_source') or 'the file'}, not used: "
            "another file names the same rank, or none)"
        )
        for i in infos
    ]


def _several_per_file(infos: list[dict]) -> str:
    """'; but FILE holds N processes with GPU work ...' for each export that holds several (an nsys profile
    over a whole mpirun or torchrun job): each export counts as one rank, read in one process's loop, so such
    a file's other ranks are not compared. '' where none does."""
    said = [
        f"{i['path']} holds {i['gpu_processes']} processes with GPU work ({i['gpu_process_list']})"
        + ("" if i.get("loop_pid") is None else f", of which it reads process {i['loop_pid']}'s loop")
        for i in infos
        if (i.get("gpu_processes") or 0) > 1
    ]
    if not said:
        return ""
    return (
        f"; but {'; '.join(said)}: ranks compares one export per rank and counts each export as one rank, read "
        "in the process whose loop `nsysql iterations` finds (it names it), so the other processes of such a "
        "file are not compared; profile each rank to its own file (nsys profile -o rank%q{RANK} ...)"
    )


def reduce(con, tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Cross-rank frames: per rank, per iteration (the rank waited for), stragglers."""
    if "iterations" not in tables:
        raise NsysqlError(
            "no rank has iterations (NVTX ranges around the training step), so ranks cannot be compared"
            + _problems(tables["info"], files=True)
            + _several_per_file(tables["info"].to_dicts())  # what numbering says with an answer: in the one line
        )
    con.register("rank_iterations", tables["iterations"].to_arrow())
    con.register("rank_causes", tables["causes"].to_arrow())
    params = {"min_excess": MIN_EXCESS_NS, "excess_share": EXCESS_SHARE, "wait_share": WAIT_SHARE, "noise_k": NOISE_K}
    per_rank = run(con, "ranks_per_rank")
    by_iter = run(con, "ranks_by_iteration")
    strag = run(con, "ranks_stragglers", **params)
    for name in ("rank_iterations", "rank_causes"):
        con.unregister(name)
    return {"ranks": per_rank, "iterations": by_iter, "stragglers": strag}


def too_few(tables: dict[str, pl.DataFrame]) -> str | None:
    """Why no rank can be judged a straggler, where fewer than two ranks have a loop (a straggler is seen only in
    another rank's wait); None where two or more have one."""
    looped = tables["iterations"]["rank"].n_unique() if "iterations" in tables else 0
    if looped >= 2:
        return None
    ranks = tables["info"].height
    return (
        f"stragglers are judged by the wait they cause other ranks, and {looped} of {ranks} rank"
        f"{'s' if ranks != 1 else ''} {'has' if looped == 1 else 'have'} a loop to compare{_problems(tables['info'])}"
    )


def _problems(info: pl.DataFrame, files: bool = False) -> str:
    """': rank 0: why it has no loop; rank 1: ...' for the ranks of `info` without one ('' where all have one);
    with `files`, each rank's file too, where no other table names it."""
    if "problem" not in info.columns:
        return ""
    without = info.filter(pl.col("problem").is_not_null()).sort("rank")
    said = [
        f"rank {r}{f' ({f})' if files else ''}: {p}"
        for r, f, p in without.select("rank", "path", "problem").iter_rows()
    ]
    return ": " + "; ".join(said) if said else ""


def straggler_sentences(strag: pl.DataFrame, tables: dict[str, pl.DataFrame] | None = None) -> pl.DataFrame:
    """One sentence per straggling rank: which iterations, the CPU-side cause, and the wait it imposed; costliest
    first (the others' extra time in collectives, summed over its iterations: `cost_ns`). With `tables` (the
    per-rank frames), where fewer than two ranks have a loop, one sentence (rank NULL) saying why none can be
    judged, rather than none."""
    why = too_few(tables) if tables is not None else None
    if why:
        return pl.DataFrame(
            [{"rank": None, "iterations": None, "cost_ns": None, "sentence": why}],
            schema={"rank": pl.Int64, "iterations": pl.String, "cost_ns": pl.Int64, "sentence": pl.String},
        )
    rows = []
    for (rank,), g in strag.group_by(["rank"], maintain_order=True):
        cost = int(g.group_by("iteration").agg(pl.col("wait_ns").max())["wait_ns"].sum())
        its = sorted(set(g["iteration"].to_list()))
        causes = g["top_cause"].drop_nulls().value_counts(sort=True)
        cause = causes["top_cause"][0] if causes.height else "unknown"
        os_calls = g["os_call"].drop_nulls().unique().to_list()
        waits = some_of([f"rank {w}" for w in sorted(set(g["waiting_rank"].to_list()))])
        when = sorted(set(g["wait_lag"].to_list()))
        lag = {0: "the same iteration", 1: "the next iteration"}
        rows.append(
            {
                "rank": rank,
                "iterations": ", ".join(map(str, its)),
                "cost_ns": cost,
                "sentence": (
                    f"rank {rank} straggles in iterations {some_of([str(i) for i in its])} (costing the job about "
                    f"{cost / 1e6:.1f} ms): its GPU idles "
                    f"{g['excess_idle_ns'].median() / 1e6:.1f} ms more than usual while its CPU is in {cause}"
                    + (f" ({', '.join(os_calls)})" if os_calls else "")
                    + f"; {waits} then spend{'s' if ',' not in waits else ''} "
                    f"{g['wait_ns'].median() / 1e6:.1f} ms more inside collectives, in "
                    f"{' or '.join(lag[w] for w in when)}"
                ),
            }
        )
    return pl.DataFrame(
        rows, schema={"rank": pl.Int64, "iterations": pl.String, "cost_ns": pl.Int64, "sentence": pl.String}
    ).sort(["cost_ns", "rank"], descending=[True, False])
