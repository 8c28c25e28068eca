#!/usr/bin/env bash
# Like for like on the GPU machine: `nsys stats` and `nsysql stats` asked the same four reports by nsys's names
# (cuda_gpu_kern_sum, nvtx_sum, nvtx_gpu_proj_sum, nvtx_kern_sum), cold, on big_500k, alternating round by
# round on one instance, with the floor (floor.py) and the bound (bound.py) in the same rounds; then nsysql's
# default report set once per round, which also computes iterations and gaps, for the figure of earlier runs.
# Run from the repository root with .nsys-libs carried, the dependencies unpacked in /tmp/site (BENCHMARKS.md,
# Reproduce) and $OUT set:   bash benchmarks/device_like.sh [ROUNDS]
set -u
N=${1:-5}
export PYTHONPATH=/tmp/site:$PWD
# bytecode, as `pip install` leaves it (the machine sets PYTHONDONTWRITEBYTECODE=1)
python3 -m compileall -q -j 0 /tmp/site nsysql > /dev/null
F=/tmp/b/big_500k.sqlite
mkdir -p /tmp/b
[ -f $F ] || python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite $F --kernels 500000 > /dev/null 2>&1
{ date -u; nproc; uptime; python3 -c "import duckdb, polars, pyarrow; print(duckdb.__version__, polars.__version__, pyarrow.__version__)"; } > $OUT/like_env.txt 2>&1
NSYS=cuda_gpu_kern_sum,nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum
t() { /usr/bin/time -f "$1 %e %U %S %M" "${@:2}"; }
for i in $(seq $N); do
  t nsys-stats .nsys-libs/nsys stats -q -f csv --force-overwrite true -r $NSYS -o /tmp/b/r $F > /dev/null
  rm -rf /tmp/cc
  t nsysql-same python3 -m nsysql --cache-dir /tmp/cc stats -r $NSYS -o /tmp/b/q $F > /dev/null
  t nsysql-same-warm python3 -m nsysql --cache-dir /tmp/cc stats -r $NSYS -o /tmp/b/q $F > /dev/null
  rm -rf /tmp/cc
  t nsysql-default python3 -m nsysql --cache-dir /tmp/cc stats $F > /dev/null
  t floor python3 benchmarks/floor.py $F > /dev/null
  t bound python3 benchmarks/bound.py $F > /dev/null
done 2>&1 | grep -E "^(nsys-stats|nsysql-[a-z-]+|floor|bound) [0-9]" | tee $OUT/like.txt
ls -la /tmp/b > $OUT/like_files.txt
# medians per variant (wall, user+sys), and per round nsys stats' wall over each variant's
awk '{w[$1]=w[$1]" "$2; c[$1]=c[$1]" "($3+$4)} END {for (k in w) print k, w[k], "|", c[k]}' $OUT/like.txt |
  python3 -c '
import statistics, sys
for line in sys.stdin:
    k, rest = line.split(" ", 1)
    w, c = rest.split("|")
    w, c = [float(x) for x in w.split()], [float(x) for x in c.split()]
    print(f"{k:18s} median wall {statistics.median(w):6.2f} s  cpu {statistics.median(c):6.2f} s  best wall {min(w):6.2f}  n={len(w)}")
' | sort | tee $OUT/like_summary.txt
python3 - $OUT/like.txt <<'PY' | tee -a $OUT/like_summary.txt
import statistics, sys
walls = {}
for line in open(sys.argv[1]):
    k, w = line.split()[:2]
    walls.setdefault(k, []).append(float(w))
for k, w in sorted(walls.items()):
    if k != "nsys-stats":
        ratios = [a / b for a, b in zip(walls["nsys-stats"], w)]
        print(f"nsys stats / {k}: per round {', '.join(f'{r:.1f}' for r in ratios)}; median {statistics.median(ratios):.1f}x")
PY
