#!/usr/bin/env bash
# Second GPU-machine run of BENCHMARKS.md: reader/DuckDB thread settings at 500k, then nsysql against
# `nsys stats` at 10M kernels (one nsys stats run, one-process nsysql only: the device allows 10 min a call).
set -u
mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/b
{ date -u; nproc; python3 --version; uptime; } > $OUT/env.txt
python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_500k.sqlite --kernels 500000 > $OUT/gen.log 2>&1
python3 -c 'import nsysql' # compile once
for cfg in "NSYSQL_READERS=2" "NSYSQL_READERS=8" "NSYSQL_READERS=8 NSYSQL_THREADS=8" "NSYSQL_READERS=8 NSYSQL_THREADS=4"; do
  rm -rf /tmp/cc
  env $cfg python3 benchmarks/phases.py --cache-dir /tmp/cc summary /tmp/b/big_500k.sqlite > /dev/null 2> "$OUT/phases_${cfg// /_}.txt"
  echo "$cfg: $(grep total "$OUT/phases_${cfg// /_}.txt")"
done
( time python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_10m.sqlite --kernels 10000000 ) > $OUT/gen10m.log 2>&1
tail -4 $OUT/gen10m.log
python3 benchmarks/bench.py --device /tmp/b/big_10m.sqlite --single --nsys-runs 1 --timeout 400 --nsys .nsys-libs/nsys \
    --nsysql "python3 -m nsysql" --out $OUT/device10m.md 2>&1 | tail -12
