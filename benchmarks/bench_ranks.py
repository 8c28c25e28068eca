#!/usr/bin/env python3
"""Many ranks: load N per-rank exports serially, in a local process pool, and on a Dask LocalCluster.

    python benchmarks/bench_ranks.py --ranks 8 --kernels 500000 --src fixtures/train_small/train_small.sqlite
    python benchmarks/bench_ranks.py --ranks 64 --kernels 500000 --workdir /tmp/ranks64

Makes N copies of SRC with per-rank jitter and RANK set (benchmarks/gen_scaled.py), then times:
serial cold (one after another, empty cache), parallel cold (process pool, empty cache), warm (cache filled),
Dask cold (LocalCluster, 2 worker processes, empty cache), and checks that all paths give the same answers.
Prints a markdown table. Standard library + nsysql (+ dask for the Dask row).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def generate(src: Path, workdir: Path, ranks: int, kernels: int) -> list[Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    out = []
    for r in range(ranks):
        p = workdir / f"rank{r:04d}.sqlite"
        if not p.exists():
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "gen_scaled.py"),
                    str(src),
                    str(p),
                    "--kernels",
                    str(kernels),
                    "--jitter",
                    "5",
                    "--rank",
                    str(r),
                    "--seed",
                    str(r),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        out.append(p)
    return out


def timed(fn):
    t = time.perf_counter()
    r0 = os.times()
    result = fn()
    r1 = os.times()
    cpu = (
        (r1.user - r0.user)
        + (r1.system - r0.system)
        + (r1.children_user - r0.children_user)
        + (r1.children_system - r0.children_system)
    )
    return result, time.perf_counter() - t, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--kernels", type=int, default=500_000)
    ap.add_argument("--src", default=str(HERE.parent / "fixtures" / "train_small" / "train_small.sqlite"))
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--no-dask", action="store_true")
    a = ap.parse_args()

    from polars.testing import assert_frame_equal

    import nsysql

    work = Path(a.workdir or f"/tmp/nsysql-ranks-{a.ranks}x{a.kernels}")
    files, gen_s, _ = timed(lambda: generate(Path(a.src), work, a.ranks, a.kernels))
    size = sum(f.stat().st_size for f in files)
    glob = str(work / "rank*.sqlite")
    rows = []

    def fresh(name):
        d = work / f"cache-{name}"
        shutil.rmtree(d, ignore_errors=True)
        return d

    serial, t, cpu = timed(lambda: nsysql.load_many([glob], cache_dir=fresh("serial"), workers=1))
    rows.append(("serial cold (one after another)", t, cpu))
    par_dir = fresh("parallel")
    parallel, t, cpu = timed(lambda: nsysql.load_many([glob], cache_dir=par_dir))
    rows.append((f"parallel cold (process pool, {os.cpu_count()} cores)", t, cpu))
    warm, t, cpu = timed(lambda: nsysql.load_many([glob], cache_dir=par_dir))
    rows.append(("warm (cache filled)", t, cpu))
    _, t, cpu = timed(lambda: (warm.per_rank(), warm.by_iteration(), warm.stragglers()))
    rows.append(("cross-rank reduction alone (DuckDB)", t, cpu))
    results = [serial, parallel, warm]
    if not a.no_dask:
        from dask.distributed import Client, LocalCluster

        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
            Client(cl) as client,
        ):
            dask_res, t, cpu = timed(lambda: nsysql.load_many([glob], cache_dir=fresh("dask"), client=client))
        rows.append(("Dask cold (LocalCluster, 2 workers)", t, cpu))
        results.append(dask_res)
    for other in results[1:]:
        assert_frame_equal(results[0].per_rank(), other.per_rank(), rel_tol=1e-9)
        assert_frame_equal(results[0].stragglers(), other.stragglers())
        assert_frame_equal(results[0].by_iteration(), other.by_iteration(), rel_tol=1e-9)
    payload = sum(df.estimated_size() for df in warm.tables.values())
    print(
        f"\n{a.ranks} ranks x {a.kernels:,} kernels ({size / 2**30:.2f} GiB of exports, generated in {gen_s:.0f} s); "
        f"per-rank frames shipped to the reduction: {payload / 2**20:.1f} MiB in all; "
        f"all paths give identical answers\n"
    )
    print("| path | wall s | CPU s (this process + children) |\n|---|---:|---:|")
    for name, t, cpu in rows:
        print(f"| {name} | {t:.1f} | {cpu:.1f} |")
    print("\nCPU s excludes the Dask worker processes (not children of this process).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
