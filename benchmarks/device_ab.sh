#!/usr/bin/env bash
# Before/after on one GPU-machine instance (instances differ, so only figures from one run compare): cold
# `nsysql stats -r kernels,ranges,kernels-by-range,iterations,gaps` at 500k kernels with an older commit's code
# (bench_old/, made with `git archive COMMIT nsysql queries | (mkdir -p bench_old && tar -x -C bench_old)`)
# and with this tree, alternating, N times each; then `nsys stats` with the four reports it shares, twice.
# Run from the repository root with .nsys-libs and .whl carried and $OUT set:   bash benchmarks/device_ab.sh [N]
# More variants: VARIANTS="old new b" runs bench_b/'s code too (any name but `new` is bench_NAME/). Another size or
# command: KERNELS=10000000 ARGS=summary NSYS_RUNS=0 bash benchmarks/device_ab.sh 2 (cold `summary` at 10M kernels).
set -u
N=${1:-5}
K=${KERNELS:-500000}
F=/tmp/b/big_$K.sqlite
mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site
# bytecode, as `pip install` leaves it: the machine sets PYTHONDONTWRITEBYTECODE=1, so without this every run
# compiled duckdb's, polars' and nsysql's Python anew (a warm command 0.68-0.76 s instead of 0.28-0.32 s)
python3 -m compileall -q -j 0 /tmp/site nsysql $(ls -d bench_*/nsysql 2>/dev/null) > /dev/null
mkdir -p /tmp/b
PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite $F \
    --kernels $K > /dev/null 2>&1
{ date -u; nproc; uptime; } > $OUT/ab_env.txt
R=kernels,ranges,kernels-by-range,iterations,gaps
read -r -a A <<< "${ARGS:-stats -r $R}"
for i in $(seq $N); do
  for v in ${VARIANTS:-old new}; do
    rm -rf /tmp/cc
    P=/tmp/site:$PWD; [ $v != new ] && P=/tmp/site:$PWD/bench_$v
    # -P: the current directory's nsysql/ does not shadow bench_old/'s
    /usr/bin/time -f "$v %e %U %S %M" env PYTHONPATH=$P python3 -P -m nsysql --cache-dir /tmp/cc "${A[@]}" $F \
        > $OUT/stats_$v.txt
    /usr/bin/time -f "$v-warm %e %U %S %M" env PYTHONPATH=$P python3 -P -m nsysql --cache-dir /tmp/cc "${A[@]}" $F \
        > /dev/null
  done
done 2>&1 | grep -vE "^(nsysql|Command)" | tee $OUT/ab.txt
for i in $(seq ${NSYS_RUNS:-2}); do
  /usr/bin/time -f "nsys-stats %e %U %S %M" .nsys-libs/nsys stats -q -f csv --force-overwrite true \
      -r cuda_gpu_kern_sum,nvtx_sum,nvtx_gpu_proj_sum,nvtx_kern_sum -o /tmp/b/r $F > /dev/null
done 2>&1 | grep ^nsys-stats | tee -a $OUT/ab.txt
cmp -s $OUT/stats_old.txt $OUT/stats_new.txt && echo "same output" | tee -a $OUT/ab.txt
awk '{w[$1]+=$2; n[$1]++; v[$1]=v[$1]" "$2} END {for (k in w) printf "%-10s mean %.3f s:%s\n", k, w[k]/n[k], v[k]}' $OUT/ab.txt | sort
