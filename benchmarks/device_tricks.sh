#!/usr/bin/env bash
# Each trick of nsysql/tuning.py off against all on, on the GPU machine's cores (issue 32: every remaining trick's
# gain measured with it on and off): benchmarks/ab.py, cold and warm `summary` of the 500k-kernel export, variants
# alternating round by round. Run from the repository root after benchmarks/device_run.sh made /tmp/b/big_500k.sqlite
# and /tmp/site (or with them made here), $OUT set:   bash benchmarks/device_tricks.sh [ROUNDS]
set -u
N=${1:-5}
export PYTHONPATH=/tmp/site:$PWD
F=/tmp/b/big_500k.sqlite
[ -f $F ] || { mkdir -p /tmp/b; python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite $F --kernels 500000 > /dev/null; }
TRICKS=$(python3 -c 'from nsysql.tuning import TRICKS; print(" ".join(TRICKS))')
cold=("on=python3 -m nsysql --cache-dir /tmp/c_t summary $F")
for t in $TRICKS; do cold+=("$t=NSYSQL_NO_TUNING=$t python3 -m nsysql --cache-dir /tmp/c_t summary $F"); done
python3 benchmarks/ab.py $N --reset 'rm -rf /tmp/c_t' "floor=python3 benchmarks/floor.py $F" "${cold[@]}" \
    2>&1 | tee $OUT/tricks_cold.txt
rm -rf /tmp/c_w && python3 -m nsysql --cache-dir /tmp/c_w summary $F > /dev/null
warm=("on=python3 -m nsysql --cache-dir /tmp/c_w summary $F")
for t in $TRICKS; do warm+=("$t=NSYSQL_NO_TUNING=$t python3 -m nsysql --cache-dir /tmp/c_w summary $F"); done
python3 benchmarks/ab.py $N "${warm[@]}" 2>&1 | tee $OUT/tricks_warm.txt
