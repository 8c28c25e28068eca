#!/usr/bin/env python3
"""Alternating before/after runs of whole commands on one machine (standard library only).

    python benchmarks/ab.py N 'LABEL=COMMAND' ['LABEL=COMMAND' ...] [--reset 'SHELL COMMAND']

Runs every COMMAND once per round, in the order given, for N rounds, so that a slow stretch of a shared VM
hits every variant alike; before each run, `--reset` runs (default: nothing), e.g. `rm -rf /tmp/c_ab` so that
every run is cold. Prints, per label, the fastest and the median wall seconds, CPU seconds (user + sys of the
command and its waited-for children, from os.wait4) and the largest peak RSS. The commands run through the
shell with their output discarded; one that exits non-zero stops the comparison. BENCHMARKS.md quotes it as
e.g.

    python benchmarks/ab.py 8 --reset 'rm -rf /tmp/c_ab' \\
        "old=PYTHONPATH=$PWD/bench_old python -P -m nsysql --cache-dir /tmp/c_ab summary /tmp/bench/big_500k.sqlite" \\
        "new=python -m nsysql --cache-dir /tmp/c_ab summary /tmp/bench/big_500k.sqlite"
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def run_once(cmd: str) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS MiB, exit status) of one shell command."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss >> 10, os.waitstatus_to_exitcode(status)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", type=int, help="runs of each command, alternating")
    ap.add_argument("variants", nargs="+", metavar="LABEL=COMMAND")
    ap.add_argument("--reset", default="", help="shell command run before every run (e.g. clear a cache dir)")
    args = ap.parse_args(argv)
    variants = []
    for v in args.variants:
        label, sep, cmd = v.partition("=")
        if not sep or not label or not cmd:
            ap.error(f"expected LABEL=COMMAND, got {v!r}")
        variants.append((label, cmd))
    runs: dict[str, list[tuple[float, float, int]]] = {label: [] for label, _ in variants}
    for i in range(args.rounds):
        for label, cmd in variants:
            if args.reset:
                subprocess.run(args.reset, shell=True, check=False)
            wall, cpu, rss, rc = run_once(cmd)
            print(f"  round {i + 1} {label}: {wall:.2f} s wall, {cpu:.2f} s CPU, {rss} MiB, rc {rc}",
                  file=sys.stderr)
            if rc != 0:
                print(f"ab.py: {label} exited {rc}: {cmd}", file=sys.stderr)
                return 1
            runs[label].append((wall, cpu, rss))
    print("| variant | runs | wall min s | wall median s | CPU min s | CPU median s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for label, r in runs.items():
        walls, cpus = [x[0] for x in r], [x[1] for x in r]
        print(f"| {label} | {len(r)} | {min(walls):.2f} | {statistics.median(walls):.2f} | {min(cpus):.2f} | "
              f"{statistics.median(cpus):.2f} | {max(x[2] for x in r)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
