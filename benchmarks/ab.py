#!/usr/bin/env python3
"""Alternating before/after runs of whole commands on one machine (standard library only).

    python benchmarks/ab.py N 'LABEL=COMMAND' ['LABEL=COMMAND' ...] [--reset 'SHELL COMMAND']

Runs every COMMAND once per round, in the order given, for N rounds, so that a slow stretch of a shared VM
hits every variant alike; before each run, `--reset` runs (default: nothing), e.g. `rm -rf /tmp/c_ab` so that
every run is cold. Prints, per label, the fastest and the median wall seconds, CPU seconds (user + sys of the
command and its waited-for children, from os.wait4, as bench.py measures), the largest peak RSS, and, against the
first variant, the median of each round's ratio and how many rounds were faster (the figure to trust on a VM
whose speed drifts: a drift hits both runs of a round alike), with that split's two-sided sign-test p. The
commands run through `/bin/sh -c` with their output discarded; one that exits non-zero stops the comparison.
Compile each tree's bytecode first (`python -m compileall -q TREE/nsysql`, with PYTHONDONTWRITEBYTECODE unset),
as an install has it: bench.py does so itself, this script runs commands as given.
BENCHMARKS.md quotes it as e.g.

    python benchmarks/ab.py 8 --reset 'rm -rf /tmp/c_ab' \\
        "old=PYTHONPATH=$PWD/bench_old python -P -m nsysql --cache-dir /tmp/c_ab summary /tmp/bench/big_500k.sqlite" \\
        "new=python -m nsysql --cache-dir /tmp/c_ab summary /tmp/bench/big_500k.sqlite"
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import fmt, run_measured, table  # noqa: E402  (the same measurement as bench.py's rows)


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
    runs: dict[str, list[dict]] = {label: [] for label, _ in variants}
    with tempfile.TemporaryDirectory(prefix="nsysql-ab-") as scratch:
        for i in range(args.rounds):
            for label, cmd in variants:
                if args.reset:
                    subprocess.run(args.reset, shell=True, check=False)
                r = run_measured(["/bin/sh", "-c", cmd], Path(scratch) / "out")
                print(
                    f"  round {i + 1} {label}: {fmt(r['wall'])} s wall, {fmt(r['cpu'])} s CPU, "
                    f"{fmt(r['rss_mb'], 0)} MiB, rc {r['rc']}",
                    file=sys.stderr,
                )
                if r["rc"] != 0:
                    print(f"ab.py: {label} exited {r['rc']}: {cmd}", file=sys.stderr)
                    return 1
                runs[label].append(r)
    first = variants[0][0]

    def paired(label, key):
        # each round's ratio to the first variant's run of the same round: a slow stretch of the VM that hits a
        # whole round cancels out (medians of separate runs moved by 10% between batches of the same code)
        if label == first:
            return []
        return [a[key] / b[key] for a, b in zip(runs[label], runs[first]) if b[key]]

    rows = [
        (
            label,
            [r["wall"] for r in rs],
            [r["cpu"] for r in rs],
            max(r["rss_mb"] for r in rs),
            paired(label, "wall"),
            paired(label, "cpu"),
        )
        for label, rs in runs.items()
    ]
    print(
        table(
            rows,
            [
                ("variant", lambda r: r[0]),
                ("runs", lambda r: len(r[1])),
                ("wall min s", lambda r: fmt(min(r[1]))),
                ("wall median s", lambda r: fmt(statistics.median(r[1]))),
                ("CPU min s", lambda r: fmt(min(r[2]))),
                ("CPU median s", lambda r: fmt(statistics.median(r[2]))),
                ("peak RSS MiB", lambda r: fmt(r[3], 0)),
                (f"wall / {first}, median of rounds", lambda r: fmt(statistics.median(r[4]), 3) if r[4] else ""),
                (f"CPU / {first}", lambda r: fmt(statistics.median(r[5]), 3) if r[5] else ""),
                (f"rounds faster than {first}", lambda r: f"{sum(x < 1 for x in r[4])} of {len(r[4])}" if r[4] else ""),
                ("sign test p", lambda r: fmt(sign_test(sum(x < 1 for x in r[4]), len(r[4])), 3) if r[4] else ""),
            ],
        )
    )
    return 0


def sign_test(k: int, n: int) -> float:
    """Two-sided sign test: the chance of a split at least as uneven as k of n rounds faster if neither variant
    were faster (each round a fair coin). On this project's VM a 2-3% change needs ~20 rounds to reach p < 0.05;
    12 of 16 gives 0.077, 14 of 20 gives 0.115, 8 of 8 gives 0.008."""
    from math import comb

    extreme = max(k, n - k)
    return min(1.0, 2 * sum(comb(n, i) for i in range(extreme, n + 1)) / 2**n)


if __name__ == "__main__":
    sys.exit(main())
