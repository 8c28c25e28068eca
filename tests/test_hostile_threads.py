"""A Profile freed by Python's cyclic garbage collector while another thread lists every thread's frames.

An engine refers to itself, so the cyclic collector frees it. On CPython 3.11 a threading.local freed there
deadlocks when the collection runs inside sys._current_frames(): Dask's profiler calls it in every worker, and a
`load_many(client=...)` worker hung so. With the collector made to run at every allocation (threshold 1), the
frames' allocation collects the closed profile at once: the process must finish."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, built_cache, fixture

SCRIPT = """
import gc, sys, threading
import nsysql

p = nsysql.load(sys.argv[1])
p.summary()                  # worker engines on threads of their own
p.sql("SELECT count(*) FROM gpu_ops")   # the sandbox's cursor
p.close()
del p
stop = threading.Event()

def idle():
    def deeper():            # a frame that has no frame object yet: sys._current_frames() allocates one
        stop.wait()
    deeper()

t = threading.Thread(target=idle)
t.start()
gc.set_threshold(1, 1, 1)
for _ in range(50):
    sys._current_frames()
stop.set()
t.join()
print("finished")
"""


def test_a_profile_the_collector_frees_inside_current_frames_does_not_hang(tmp_path):
    # the entry a first load builds, built once in the run (conftest.built_cache): summary's worker engines and
    # the sandbox's cursor are made on it as on a cold one
    cache = built_cache(tmp_path / "cache", fixture("train_small"))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(fixture("train_small"))],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "NSYSQL_CACHE_DIR": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "finished"
