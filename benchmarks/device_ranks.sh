#!/usr/bin/env bash
# How many worker processes `nsysql ranks` should load exports in, on the GPU machine's 16 cores: 4 and 8 copies
# of big_500k (74.7 MiB each) and 8 copies of big_step (1.4 MiB), cold, with --workers 1 (in this process), 2, 4,
# 8 and 16, alternating, ROUNDS rounds. Run from the repository root with the dependencies unpacked in /tmp/site
# (BENCHMARKS.md, Reproduce) and $OUT set:   bash benchmarks/device_ranks.sh [ROUNDS]
set -u
N=${1:-2}
export PYTHONPATH=/tmp/site:$PWD
python3 -m compileall -q -j 0 /tmp/site nsysql > /dev/null
mkdir -p /tmp/b /tmp/r
[ -f /tmp/b/big_500k.sqlite ] || python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_500k.sqlite --kernels 500000 > /dev/null 2>&1
for i in 1 2 3 4 5 6 7 8; do
  cp /tmp/b/big_500k.sqlite /tmp/r/big_$i.sqlite; cp fixtures/big_step/big_step.sqlite /tmp/r/small_$i.sqlite
done
for i in $(seq $N); do
  for set in "big 4" "big 8" "small 8"; do
    read -r kind n <<< "$set"
    files=$(for j in $(seq $n); do echo /tmp/r/${kind}_$j.sqlite; done)
    for w in 1 2 4 8 16; do
      rm -rf /tmp/cr
      /usr/bin/time -f "$kind$n workers=$w %e %U %S %M" python3 -m nsysql --cache-dir /tmp/cr ranks --workers $w $files > /dev/null
    done
  done
done 2>&1 | grep -E "^(big|small)[0-9]+ workers" | tee $OUT/ranks.txt
