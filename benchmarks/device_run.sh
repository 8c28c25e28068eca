#!/usr/bin/env bash
# The GPU-machine side of BENCHMARKS.md: nsysql against `nsys stats` on the issue-4 case (500k kernels).
# Run from the repository root on the GPU machine, with .nsys-libs and .whl/site.tar.xz carried and $OUT set
# (see BENCHMARKS.md, "GPU machine"):   bash benchmarks/device_run.sh
set -u
mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/b
{ date -u; nproc; python3 --version; uptime; } > $OUT/env.txt
python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_500k.sqlite --kernels 500000 > $OUT/gen.log 2>&1
tail -3 $OUT/gen.log
# where a cold summary spends its time, with the default reader threads and with two
for r in "" 2; do
  rm -rf /tmp/cc
  NSYSQL_READERS=$r python3 benchmarks/phases.py --cache-dir /tmp/cc summary /tmp/b/big_500k.sqlite > /dev/null 2> $OUT/phases_readers${r:-default}.txt
done
cat $OUT/phases_readersdefault.txt
python3 benchmarks/bench.py --device /tmp/b/big_500k.sqlite --nsys .nsys-libs/nsys --nsysql "python3 -m nsysql" \
    --out $OUT/device.md 2>&1 | tail -40
