#!/usr/bin/env python3
"""Side-by-side benchmarks for nsysql (standard library only).

    bench.py --here FILE [FILE ...] [--commands summary,kbr-innermost,iterations,gaps]
             [--nsysai LABEL=PATH ...] [--quick] [--nsysql CMD] [--out FILE.md]
    bench.py --device FILE --nsys PATH [--nsysql CMD] [--out FILE.md]
    bench.py --generate [--src SRC] [--outdir DIR] [--kernels 500000,10000000] [--deep]

--here     For every FILE: each nsysql command cold (fresh, empty --cache-dir) then
           warm (the same cache dir again), and each nsys-ai given with --nsysai
           (`nsys-ai summary FILE`) cold (its `<file>.nsys-cache` removed) then warm.
           nsys-ai writes its cache beside the profile, so it is run on a symlink in
           a scratch directory: nothing is written beside FILE.
--device   `nsys stats -r cuda_gpu_kern_sum,nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum
           -f csv` (two runs) against nsysql answering kernels, ranges,
           kernels-by-range, iterations and gaps: as a user would (first command fills
           the cache), all warm, and every command with --no-cache. Prints the ratio.
--generate Makes the scaled inputs with gen_scaled.py / gen_deep_nvtx.py.

Each command runs as a child process; wall time is measured around it, CPU time
(user + sys) and peak RSS (ru_maxrss) come from os.wait4 on that child, which
includes its waited-for descendants. Output goes to files in a scratch directory;
its size in lines is reported. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

NSYSQL_COMMANDS = {
    "summary": ["summary"],
    "kernels": ["kernels"],
    "ranges": ["ranges"],
    "kbr": ["kernels-by-range"],
    "kbr-innermost": ["kernels-by-range", "--innermost"],
    "iterations": ["iterations"],
    "gaps": ["gaps"],
}
NSYS_REPORTS = "cuda_gpu_kern_sum,nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum"
DEVICE_COMMANDS = ["kernels", "ranges", "kbr", "iterations", "gaps"]


def run_measured(argv, stdout_path, timeout=None, cwd=None, env=None):
    """Run argv; return dict(wall, cpu, rss_mb, rc, lines, err)."""
    with open(stdout_path, "wb") as out, open(str(stdout_path) + ".err", "wb") as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=cwd, env=env)
        except OSError as e:
            return {"wall": None, "cpu": None, "rss_mb": None, "rc": None, "lines": 0, "err": str(e)}
        rc, ru = None, None
        deadline = None if timeout is None else t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if deadline is not None and time.perf_counter() > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                rc = "timeout"
                break
            time.sleep(0.005)
        wall = time.perf_counter() - t0
    proc.returncode = rc if isinstance(rc, int) else -9  # keep Popen from waiting again
    lines = sum(1 for _ in open(stdout_path, "rb"))
    errtail = Path(str(stdout_path) + ".err").read_bytes().decode(errors="replace").strip()
    return {
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "rss_mb": ru.ru_maxrss / 1024.0,  # KiB on Linux
        "rc": rc,
        "lines": lines,
        "err": errtail.splitlines()[-1][:160] if errtail else "",
    }


def fmt(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def table(rows, cols):
    out = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(f(r)) for _, f in cols) + " |")
    return "\n".join(out)


def human_size(path):
    n = os.path.getsize(path)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def machine_line():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    except OSError:
        pass
    return (
        f"{platform.node()}: {os.cpu_count()} CPUs ({model}), {mem}, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, load average {os.getloadavg()[0]:.2f} at start, "
        f"speed gauge {speed_gauge():.2f} s"
    )


def speed_gauge() -> float:
    """Seconds for a fixed pure-Python loop (10M additions in a function), best of 2. A shared VM's speed moves by
    as much as a third from hour to hour (the same loop at module level took 0.84 s to 1.28 s on the 2-core dev
    VM on 2026-11-23, while one cold command took 2.1 s to 3.0 s), so tables taken at different times compare
    only with this figure beside them."""
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        s = 0
        for i in range(10_000_000):
            s += i
        best = min(best, time.perf_counter() - t)
    return best


def nsysql_argv(args):
    argv = shlex.split(args.nsysql) if args.nsysql else [sys.executable, "-m", "nsysql"]
    compile_bytecode(argv)
    return argv


def compile_bytecode(argv) -> None:
    """Write the bytecode of the nsysql package that `argv` runs, as `pip install` does for an installed package,
    so that every run measures an install, not Python compiling nsysql's sources first. A checkout run in place
    under PYTHONDONTWRITEBYTECODE=1 (as on the 2-core dev VM) otherwise compiles ~30 ms of sources, on one core,
    at the start of every command. Best effort: nothing happens where the package cannot be found or written."""
    if not argv or "python" not in Path(argv[0]).name or argv[1:3] != ["-m", "nsysql"]:
        return  # an `nsysql` executable: installed, so already compiled
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = "import compileall, os, nsysql; compileall.compile_dir(os.path.dirname(nsysql.__file__), quiet=1)"
    subprocess.run([argv[0], "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


COLS = [
    ("file", lambda r: r["file"]),
    ("tool", lambda r: r["tool"]),
    ("command", lambda r: r["command"]),
    ("run", lambda r: r["run"]),
    ("wall s", lambda r: fmt(r["wall"])),
    ("CPU s", lambda r: fmt(r["cpu"])),
    ("peak RSS MiB", lambda r: fmt(r["rss_mb"], 0)),
    ("rc", lambda r: r["rc"]),
    ("out lines", lambda r: r["lines"]),
]


def emit(text, args):
    print(text, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


# --------------------------------------------------------------------------- --here
def mode_here(args):
    scratch = Path(tempfile.mkdtemp(prefix="nsysql-bench-", dir=args.scratch))
    base = nsysql_argv(args)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    for c in commands:
        if c not in NSYSQL_COMMANDS:
            sys.exit(f"unknown command {c!r}; choose from {', '.join(NSYSQL_COMMANDS)}")
    nsysai = []
    for spec in args.nsysai or []:
        label, _, path = spec.rpartition("=")
        path = shutil.which(path) or path
        if not os.path.exists(path):
            print(f"nsys-ai {spec!r} not found: skipped", file=sys.stderr)
            continue
        nsysai.append((label or "nsys-ai", path))
    rows = []
    emit(f"\n<!-- {machine_line()} -->", args)
    try:
        for fi, f in enumerate(args.here):
            f = os.path.abspath(f)
            tag = f"{Path(f).name} ({human_size(f)})"
            for c in commands:
                cache = scratch / f"cache-{fi}-{c}"
                cache.mkdir()
                runs = ["cold", "warm"] + ["warm"] * (args.repeat - 1)
                for i, run in enumerate(runs):
                    argv = base + ["--cache-dir", str(cache)] + NSYSQL_COMMANDS[c] + [f]
                    r = run_measured(argv, scratch / f"out-{fi}-{c}-{i}.txt", timeout=args.timeout)
                    r.update(file=tag, tool="nsysql", command=" ".join(NSYSQL_COMMANDS[c]), run=run)
                    rows.append(r)
                    print(
                        f"  {tag} nsysql {c} {run}: {fmt(r['wall'])} s wall, {fmt(r['cpu'])} s CPU, {fmt(r['rss_mb'], 0)} MiB, rc {r['rc']} {r['err'] if r['rc'] else ''}",
                        file=sys.stderr,
                        flush=True,
                    )
                shutil.rmtree(cache, ignore_errors=True)
            for label, exe in nsysai:
                d = scratch / f"ai-{fi}-{label}"
                d.mkdir()
                link = d / Path(f).name
                os.symlink(f, link)
                env = dict(os.environ, NO_COLOR="1")
                runs = ["cold", "warm"] + ["warm"] * (args.repeat - 1)
                for i, run in enumerate(runs):
                    r = run_measured(
                        [exe, "summary", str(link)],
                        scratch / f"ai-{fi}-{label}-{i}.txt",
                        timeout=args.timeout,
                        cwd=d,
                        env=env,
                    )
                    r.update(file=tag, tool=f"nsys-ai 0.3.0 ({label})", command="summary", run=run)
                    rows.append(r)
                    print(
                        f"  {tag} nsys-ai[{label}] {run}: {fmt(r['wall'])} s wall, {fmt(r['cpu'])} s CPU, {fmt(r['rss_mb'], 0)} MiB, rc {r['rc']} {r['err'] if r['rc'] else ''}",
                        file=sys.stderr,
                        flush=True,
                    )
                cached = any(p.name.endswith(".nsys-cache") and p.is_dir() for p in d.iterdir())
                rows[-1]["command"] += "" if cached else " (no cache built)"
                shutil.rmtree(d, ignore_errors=True)
        emit(table(rows, COLS), args)
    finally:
        if args.keep:
            print(f"outputs kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


# --------------------------------------------------------------------------- --device
def mode_device(args):
    f = os.path.abspath(args.device)
    scratch = Path(tempfile.mkdtemp(prefix="nsysql-bench-", dir=args.scratch))
    base = nsysql_argv(args)
    tag = f"{Path(f).name} ({human_size(f)})"
    rows = []
    emit(f"\n<!-- {machine_line()} -->", args)
    # nsys stats has no cache of its own; run it twice (second run: page cache warm).
    nsys_walls = []
    for i, run in enumerate(["1st", "2nd"][: args.nsys_runs]):
        od = scratch / f"stats{i}"
        od.mkdir()
        argv = [args.nsys, "stats", "-q", "-f", "csv", "-r", NSYS_REPORTS, "-o", str(od / "r"), f]
        r = run_measured(argv, scratch / f"stats{i}.txt", timeout=args.timeout)
        r.update(file=tag, tool="nsys stats", command="-r " + NSYS_REPORTS, run=run)
        r["lines"] = sum(sum(1 for _ in open(p, "rb")) for p in od.glob("*.csv"))
        rows.append(r)
        nsys_walls.append(r["wall"])
        print(f"  nsys stats {run}: {fmt(r['wall'])} s rc {r['rc']} {r['err']}", file=sys.stderr, flush=True)

    def sequence(label, cache_args):
        total = {"wall": 0.0, "cpu": 0.0, "rss_mb": 0.0, "lines": 0, "rc": 0}
        for c in DEVICE_COMMANDS:
            argv = base + cache_args + NSYSQL_COMMANDS[c] + [f]
            r = run_measured(argv, scratch / f"{label}-{c}.txt", timeout=args.timeout)
            r.update(file=tag, tool="nsysql", command=" ".join(NSYSQL_COMMANDS[c]), run=label)
            rows.append(r)
            print(
                f"  nsysql {c} {label}: {fmt(r['wall'])} s rc {r['rc']} {r['err'] if r['rc'] else ''}",
                file=sys.stderr,
                flush=True,
            )
            for k in ("wall", "cpu"):
                total[k] += r[k] or 0.0
            total["rss_mb"] = max(total["rss_mb"], r["rss_mb"] or 0.0)
            total["lines"] += r["lines"]
            total["rc"] = total["rc"] or r["rc"]
        total.update(
            file=tag, tool="nsysql", command="all 5 (" + ", ".join(DEVICE_COMMANDS) + ")", run=f"**{label} total**"
        )
        rows.append(total)
        return total

    # one process answering all of them (`nsysql stats`, the way nsys stats runs its reports)
    single = {}
    one_cache = scratch / "one-cache"
    for label, extra in (
        ("cold", ["--cache-dir", str(one_cache)]),
        ("warm", ["--cache-dir", str(one_cache)]),
        ("no-cache", ["--no-cache"]),
    ):
        argv = (
            base
            + extra
            + ["stats", "-r", "kernels,ranges,kernels-by-range,iterations,gaps", "-o", str(scratch / f"one-{label}"), f]
        )
        r = run_measured(argv, scratch / f"one-{label}.txt", timeout=args.timeout)
        r.update(
            file=tag,
            tool="nsysql",
            command="stats -r kernels,ranges,kernels-by-range,iterations,gaps",
            run=f"one process, {label}",
        )
        r["lines"] = sum(sum(1 for _ in open(p, "rb")) for p in scratch.glob(f"one-{label}_*.csv"))
        rows.append(r)
        single[label] = r
        print(
            f"  nsysql stats {label}: {fmt(r['wall'])} s rc {r['rc']} {r['err'] if r['rc'] else ''}",
            file=sys.stderr,
            flush=True,
        )
    sequences = []
    if not args.single:
        cache = scratch / "cache"
        cache.mkdir()
        sequences = [
            ("cold, then cached (a user's first session)", sequence("cold→cached", ["--cache-dir", str(cache)])),
            ("warm (cache present)", sequence("warm", ["--cache-dir", str(cache)])),
            ("--no-cache every command", sequence("no-cache", ["--no-cache"])),
        ]
    emit(table(rows, COLS), args)
    ref = min(w for w in nsys_walls if w is not None) if any(nsys_walls) else None
    best = f"best of {len(nsys_walls)}" if len(nsys_walls) > 1 else "one run"
    lines = []
    if sequences:
        lines += [
            "",
            f"| nsysql sequence (5 commands) | wall s | nsys stats (4 reports) wall s, {best} | speed-up |",
            "|---|---|---|---|",
        ]
    for label, t in sequences:
        ratio = (ref / t["wall"]) if ref and t["wall"] else None
        lines.append(f"| {label} | {fmt(t['wall'])} | {fmt(ref)} | {fmt(ratio, 1)}× |")
    lines += [
        "",
        f"| `nsysql stats` (5 reports, one process) | wall s | nsys stats (4 reports) wall s, {best} | speed-up |",
        "|---|---|---|---|",
    ]
    for label, t in single.items():
        ratio = (ref / t["wall"]) if ref and t["wall"] else None
        lines.append(f"| {label} | {fmt(t['wall'])} | {fmt(ref)} | {fmt(ratio, 1)}× |")
    emit("\n".join(lines), args)
    if args.keep_csv:
        dst = Path(args.keep_csv)
        dst.mkdir(parents=True, exist_ok=True)
        for p in (scratch / "stats0").glob("*.csv"):
            shutil.copy(p, dst / p.name)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------- --generate
def mode_generate(args):
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for n in [int(float(x)) for x in args.kernels.split(",") if x]:
        size = f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}m"
        dst = out / f"{Path(args.src).stem.split('_')[0]}_{size}.sqlite"  # big_500k.sqlite from big_step
        if dst.exists() and not args.force:
            print(f"{dst} exists (use --force to rebuild)", file=sys.stderr)
        else:
            subprocess.run(
                [sys.executable, str(HERE / "gen_scaled.py"), args.src, str(dst), "--kernels", str(n)], check=True
            )
        made.append(dst)
    if args.deep:
        dst = out / "deep_50k.sqlite"
        if dst.exists() and not args.force:
            print(f"{dst} exists (use --force to rebuild)", file=sys.stderr)
        else:
            cmd = [
                sys.executable,
                str(HERE / "gen_deep_nvtx.py"),
                str(dst),
                "--ranges",
                "50000",
                "--depth",
                "6",
                "--kernels",
                "10000",
            ]
            if args.deep_src:
                cmd += ["--src", args.deep_src]
            subprocess.run(cmd, check=True)
        made.append(dst)
    for m in made:
        print(m)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--here", nargs="+", metavar="FILE", help="nsysql (cold/warm) vs nsys-ai summary")
    g.add_argument("--device", metavar="FILE", help="nsysql vs nsys stats (on the GPU machine)")
    g.add_argument("--generate", action="store_true", help="make the scaled inputs")
    ap.add_argument(
        "--commands",
        default="summary,kbr-innermost,iterations,gaps",
        help=f"nsysql commands for --here (from {', '.join(NSYSQL_COMMANDS)})",
    )
    ap.add_argument("--quick", action="store_true", help="--here: summary only, one warm run (smoke test)")
    ap.add_argument("--repeat", type=int, default=1, help="warm runs per command (default 1)")
    ap.add_argument(
        "--nsysai",
        action="append",
        metavar="[LABEL=]PATH",
        help="an nsys-ai executable to compare (repeatable); missing ones are skipped",
    )
    ap.add_argument("--nsysql", help="how to run nsysql (default: this python -m nsysql)")
    ap.add_argument("--nsys", default="nsys", help="--device: the nsys executable")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per command before it is killed")
    ap.add_argument("--scratch", default=None, help="where scratch dirs go (default: $TMPDIR)")
    ap.add_argument("--out", help="also append the tables to this file")
    ap.add_argument("--keep", action="store_true", help="--here: keep the command outputs")
    ap.add_argument("--keep-csv", help="--device: copy nsys stats CSVs here")
    ap.add_argument(
        "--single",
        action="store_true",
        help="--device: only the one-process `nsysql stats` runs, not the five separate commands",
    )
    ap.add_argument("--nsys-runs", type=int, default=2, choices=(1, 2), help="--device: nsys stats runs (default 2)")
    ap.add_argument(
        "--src",
        default=str(ROOT / "fixtures/big_step/big_step.sqlite"),
        help="--generate: export to scale (default: the big_step fixture, ~1,490 kernels a step)",
    )
    ap.add_argument("--deep-src", help="--generate: --src for gen_deep_nvtx.py")
    ap.add_argument("--outdir", default="/tmp/bench", help="--generate: output folder")
    ap.add_argument("--kernels", default="500000", help="--generate: comma-separated kernel counts")
    ap.add_argument("--deep", action="store_true", help="--generate: also the 50k-range deep NVTX file")
    ap.add_argument("--force", action="store_true", help="--generate: rebuild existing files")
    args = ap.parse_args(argv)
    if args.quick:
        args.commands, args.repeat = "summary", 1
    if args.here:
        return mode_here(args)
    if args.device:
        return mode_device(args)
    return mode_generate(args)


if __name__ == "__main__":
    sys.exit(main())
