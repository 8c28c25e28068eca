#!/usr/bin/env bash
# `nsysql profile` end to end on a GPU machine, then the .nsys-rep input and `nsysql trace` on what it made.
#
# Run from the repository root with $OUT set (a folder for what comes back), nsys reachable as .nsys-libs/nsys
# (the wrapper of ../shared/device-nsys/prepare.sh; or set NSYS_BIN) and the wheels nsysql needs in .whl/
# (duckdb, polars, polars-runtime, click, plotly, narwhals, adbc-driver-manager, adbc-driver-sqlite, and nsysql's
# own, e.g. from `pip wheel --no-deps -w .whl .`; without nsysql's wheel this checkout is used). pyarrow, numpy
# and pandas are expected on the machine already.
#
#     OUT=/tmp/out bash scripts/device_profile_demo.sh
#
# Leaves at most 5 files in $OUT: demo.log (everything printed), demo.tar.xz (the folder `nsysql profile` wrote),
# train_steps.trace.json(.xz), iterations_2_4.trace.json and checks.txt (one line per check, PASS or FAIL).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the results}
NSYS_BIN=${NSYS_BIN:-$PWD/.nsys-libs/nsys}
WORK=${WORK:-/tmp/nsysql-demo}
SITE=${SITE:-$WORK/site}  # a folder with the dependencies already unpacked may be given
DEMO=$WORK/demo
mkdir -p "$OUT"
rm -rf "$WORK" && mkdir -p "$WORK"
export NSYSQL_CACHE_DIR=$WORK/cache
CHECKS=$OUT/checks.txt
: > "$CHECKS"
check() {  # check NAME COMMAND...: run COMMAND, note PASS or FAIL
  local name=$1; shift
  if "$@"; then echo "PASS $name" >> "$CHECKS"; else echo "FAIL $name" >> "$CHECKS"; fi
}

exec > >(tee "$OUT/demo.log") 2>&1
echo "=== $(date -u) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
"$NSYS_BIN" --version 2>&1 | head -2

echo "=== install nsysql and its dependencies from .whl/"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl 2>&1 | tail -3
fi
export PYTHONPATH=$SITE
ls "$SITE" | grep -qx nsysql || export PYTHONPATH=$SITE:$PWD  # no nsysql wheel: this checkout
# -P: not the checkout in the current folder ahead of the installed wheel (Python 3.11 and later)
PYEXE=$(command -v python3)
PY="$PYEXE -P"; $PY -c pass 2>/dev/null || PY=$PYEXE
NSYSQL="$PY -m nsysql"
$PY -c 'import nsysql, duckdb, polars; print("nsysql", nsysql.__version__, "from", nsysql.__file__)'

echo "=== 1. nsysql profile --nsys $NSYS_BIN --out $DEMO -- python3 fixtures/workloads/train_steps.py"
t0=$(date +%s)
timeout 240 $NSYSQL profile --nsys "$NSYS_BIN" --out "$DEMO" -- python3 fixtures/workloads/train_steps.py
rc=$?
echo "=== exit status $rc, $(( $(date +%s) - t0 )) s"
check "profile exits 0 for a program that exits 0" test "$rc" = 0
echo "=== ls -la $DEMO"
ls -la "$DEMO"
for f in train_steps.nsys-rep train_steps.sqlite summary.txt report.html report.md kernels.csv api.csv; do
  check "profile wrote $f" test -s "$DEMO/$f"
done
check "profile wrote the top-10 chart" sh -c "ls $DEMO/top10_kernels.* >/dev/null"
echo "=== summary.txt"
cat "$DEMO/summary.txt"
echo "=== report.md"
cat "$DEMO/report.md"

echo "=== 2. exit status: nsysql profile -- python3 -c 'import sys; sys.exit(3)'"
timeout 120 $NSYSQL profile --nsys "$NSYS_BIN" --out "$WORK/exit3" --chart svg -- \
  python3 -c 'import sys; print("exiting with 3"); sys.exit(3)' > "$WORK/exit3.log" 2>&1
rc=$?
tail -5 "$WORK/exit3.log"
echo "=== exit status $rc (the program's: 3)"
check "profile exits with the program's status (3)" test "$rc" = 3

echo "=== 3. Ctrl-C: SIGINT to nsysql alone, 8 s into a 60 s program"
set -m  # job control: without it bash starts a background job with SIGINT ignored
$NSYSQL profile --nsys "$NSYS_BIN" --out "$WORK/sigint" --chart svg -- \
  python3 -c 'import time; print("sleeping", flush=True); time.sleep(60); print("not interrupted")' \
  > "$WORK/sigint.log" 2>&1 &
pid=$!
sleep 8
kill -INT $pid
t1=$(date +%s)
wait $pid
rc=$?
set +m
tail -8 "$WORK/sigint.log"
echo "=== exit status $rc after SIGINT, ended $(( $(date +%s) - t1 )) s after it; files: $(ls "$WORK/sigint" 2>/dev/null | tr '\n' ' ')"
check "SIGINT ends the profiled program early" sh -c "! grep -q 'not interrupted' $WORK/sigint.log"

echo "=== 4. .nsys-rep in: NSYS=$NSYS_BIN nsysql summary $DEMO/train_steps.nsys-rep"
before=$(ls -l --time-style=full-iso "$DEMO" | md5sum)
repsum=$(md5sum < "$DEMO/train_steps.nsys-rep")
NSYS=$NSYS_BIN timeout 180 $NSYSQL summary "$DEMO/train_steps.nsys-rep" > "$WORK/rep_summary.txt"
rc=$?
cat "$WORK/rep_summary.txt"
check ".nsys-rep summary exits 0" test "$rc" = 0
ls -la "$NSYSQL_CACHE_DIR"/exports/*
check ".nsys-rep exported into the cache" sh -c "ls $NSYSQL_CACHE_DIR/exports/*/train_steps.sqlite >/dev/null"
check "nothing written beside the .nsys-rep" test "$before" = "$(ls -l --time-style=full-iso "$DEMO" | md5sum)"
check "the .nsys-rep is unchanged" test "$repsum" = "$(md5sum < "$DEMO/train_steps.nsys-rep")"
echo "=== kernels of the .nsys-rep (--nsys, from the cache now) against those of the export nsys profile wrote"
$NSYSQL --nsys "$NSYS_BIN" kernels --csv "$DEMO/train_steps.nsys-rep" > "$WORK/k_rep.csv"
$NSYSQL kernels --csv "$DEMO/train_steps.sqlite" > "$WORK/k_sqlite.csv"
check ".nsys-rep kernels = export kernels" cmp -s "$WORK/k_rep.csv" "$WORK/k_sqlite.csv"
head -4 "$WORK/k_rep.csv"
echo "=== without nsys named (discovery: PATH has none; the install folders may)"
env -u NSYS NSYSQL_CACHE_DIR=$WORK/cache2 PATH=/usr/bin:/bin $NSYSQL info "$DEMO/train_steps.nsys-rep" \
  > /dev/null 2> "$WORK/noname.err"
echo "exit status $?: $(cat "$WORK/noname.err")"

echo "=== 5. nsysql trace"
timeout 120 $NSYSQL trace "$DEMO/train_steps.sqlite" -o "$WORK/train_steps.trace.json"
check "trace exits 0" test $? = 0
timeout 120 $NSYSQL trace "$DEMO/train_steps.sqlite" -o "$OUT/iterations_2_4.trace.json" --iterations 2:4
$PY - "$WORK/train_steps.trace.json" "$OUT/iterations_2_4.trace.json" "$DEMO/train_steps.sqlite" <<'EOF' >> "$CHECKS"
import json, sys
from collections import Counter
import nsysql
whole, part, export = sys.argv[1:]
p = nsysql.load(export)
for label, path in (("whole", whole), ("iterations 2:4", part)):
    ev = json.load(open(path))["traceEvents"]
    ok = all(e["ph"] in "XMbe" and isinstance(e["pid"], int) and isinstance(e["tid"], int) and "ts" in e
             and (e["ph"] != "X" or e["dur"] >= 0) for e in ev)
    print(("PASS" if ok else "FAIL"), f"trace {label}: {len(ev)} events well-formed", Counter(e.get("cat") for e in ev))
ev = json.load(open(whole))["traceEvents"]
c = Counter(e.get("cat") for e in ev if e["ph"] in "Xb")
want = {"kernel": "SELECT count(*) FROM gpu_ops WHERE kind = 'kernel'", "cuda_api": "SELECT count(*) FROM api_calls",
        "nvtx": "SELECT count(*) FROM nvtx_ranges"}
for cat, sql in want.items():
    n = p.sql(sql).item()
    print("PASS" if c[cat] == n else "FAIL", f"trace {cat} events {c[cat]} = canonical rows {n}")
EOF
size=$(stat -c %s "$WORK/train_steps.trace.json")
if [ "$size" -lt 15000000 ]; then cp "$WORK/train_steps.trace.json" "$OUT/"; else xz -T4 -c "$WORK/train_steps.trace.json" > "$OUT/train_steps.trace.json.xz"; fi

echo "=== pack $DEMO"
tar -C "$WORK" -cJf "$OUT/demo.tar.xz" demo
ls -la "$OUT"
echo "=== checks"
cat "$CHECKS"
echo "=== done $(date -u)"
