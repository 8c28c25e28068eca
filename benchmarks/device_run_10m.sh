#!/usr/bin/env bash
# GPU machine, 10M kernels: nsysql (one process: cold, warm, no-cache) against one `nsys stats` run.
# Run from the repository root with .nsys-libs and .whl carried and $OUT set: bash benchmarks/device_run_10m.sh
set -u
mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/b
{ date -u; nproc; python3 --version; uptime; } > $OUT/env.txt
( time python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_10m.sqlite --kernels 10000000 ) > $OUT/gen10m.log 2>&1
tail -4 $OUT/gen10m.log
python3 benchmarks/bench.py --device /tmp/b/big_10m.sqlite --single --nsys-runs 1 --timeout 400 --nsys .nsys-libs/nsys \
    --nsysql "python3 -m nsysql" --out $OUT/device10m.md 2> $OUT/bench10m.err | tail -12
tail -8 $OUT/bench10m.err
