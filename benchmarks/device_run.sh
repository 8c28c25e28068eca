#!/usr/bin/env bash
# The GPU-machine side of BENCHMARKS.md: nsysql against `nsys stats` on the issue-4 case (500k kernels).
# Run from the repository root on the GPU machine, with .nsys-libs and .whl/site.tar.xz carried and $OUT set
# (see BENCHMARKS.md, "GPU machine"):   bash benchmarks/device_run.sh
set -u
mkdir -p /tmp/site && { [ ! -f .whl/site.tar.xz ] || tar xJf .whl/site.tar.xz -C /tmp/site; }
# bytecode, as `pip install` leaves it: the machine sets PYTHONDONTWRITEBYTECODE=1, so without this every run
# compiled duckdb's, polars' and nsysql's Python anew (a warm command 0.68-0.76 s instead of 0.28-0.32 s)
python3 -m compileall -q -j 0 /tmp/site nsysql > /dev/null
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/b
{ date -u; nproc; python3 --version; uptime; } > $OUT/env.txt
python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_500k.sqlite --kernels 500000 > $OUT/gen.log 2>&1
tail -3 $OUT/gen.log
# start-up costs on this machine: imports, and DuckDB's first connection with all cores or two threads
python3 -X importtime -c 'import nsysql.cli' 2> $OUT/importtime.txt
sort -t'|' -k2 -n $OUT/importtime.txt | tail -6
for t in 0 2; do python3 -c "
import time; t0 = time.perf_counter(); import duckdb; t1 = time.perf_counter()
c = duckdb.connect(config={'threads': $t} if $t else {}); c.execute('select 1').fetchall(); t2 = time.perf_counter()
print('threads=$t import duckdb %.3f s, connect %.3f s, cpu %.3f s' % (t1 - t0, t2 - t1, time.process_time()))"; done
# where a cold summary spends its time, with the default reader threads and with two
for r in "" 2; do
  rm -rf /tmp/cc
  NSYSQL_READERS=$r python3 benchmarks/phases.py --cache-dir /tmp/cc summary /tmp/b/big_500k.sqlite > /dev/null 2> $OUT/phases_readers${r:-default}.txt
done
cat $OUT/phases_readersdefault.txt
python3 benchmarks/bench.py --device /tmp/b/big_500k.sqlite --nsys .nsys-libs/nsys --nsysql "python3 -m nsysql" \
    --out $OUT/device.md 2>&1 | tail -40
