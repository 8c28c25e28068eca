set -u
mkdir -p /tmp/site && tar xJf .whl/site.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD
mkdir -p /tmp/b
python3 benchmarks/gen_scaled.py fixtures/big_step/big_step.sqlite /tmp/b/big_500k.sqlite --kernels 500000 > /dev/null 2>&1
t() { rm -rf /tmp/cc; /usr/bin/time -f "$1 %e s wall %U user %S sys" env $2 python3 -m nsysql --cache-dir /tmp/cc summary /tmp/b/big_500k.sqlite > /dev/null; }
python3 -X importtime -m nsysql --version 2> $OUT/imp.txt; sort -t'|' -k2 -n $OUT/imp.txt | tail -4
python3 -c "import time; t=time.perf_counter(); import numpy; print('numpy import', time.perf_counter()-t)"
python3 -c "import time; t=time.perf_counter(); import pyarrow; import sys; print('pyarrow import', time.perf_counter()-t, 'numpy' in sys.modules)"
python3 -c "import time; t=time.perf_counter(); import duckdb; import sys; print('duckdb import', time.perf_counter()-t, 'numpy' in sys.modules)"
for rep in 1 2 3; do
  for th in 0 8 4; do t "threads=$th" "NSYSQL_THREADS=$th"; done
  t "openblas-unset(threads default)" "OPENBLAS_NUM_THREADS="
done 2>&1 | tee $OUT/diag.txt
