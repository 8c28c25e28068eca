"""GPU memory over time (`nsys profile --cuda-memory-usage=true`), on fixtures/mem_growth: a loop of 20 `step i`
ranges, PyTorch's caching allocator off, each step allocating a 4 MiB temporary and a 2 MiB buffer it keeps
(fixtures/mem_growth/COMMAND.md): held memory grows by exactly 2 MiB per step and peaks 6 MiB above the step's
start. Step 0 also holds the libraries' first allocations (cuBLAS workspace), so the rules hold from step 1."""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner
from conftest import fixture, loaded

from nsysql.cli import main

MEM = fixture("mem_growth")
KEPT = 2 * 2**20  # the buffer each step keeps
TEMP = 4 * 2**20  # the step's x @ x, 1024 x 1024 fp32, freed within the step


def test_held_bytes_end_where_the_raw_allocations_minus_frees_do():
    with sqlite3.connect(f"file:{MEM}?mode=ro", uri=True) as raw:
        (net,) = raw.execute(
            "SELECT sum(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END) FROM CUDA_GPU_MEMORY_USAGE_EVENTS"
        ).fetchone()
        (events,) = raw.execute("SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS").fetchone()
    df = loaded(str(MEM)).gpu_memory()
    assert df.height == events
    assert df["held_bytes"][-1] == net  # one process, one device


def test_each_step_keeps_two_mib_and_peaks_six_above_its_start():
    df = loaded(str(MEM)).gpu_memory(by="iteration").sort("iteration")
    assert df.height == 20
    later = df.filter(df["iteration"] >= 1)
    assert later["growth_bytes"].to_list() == [KEPT] * 19
    assert (later["peak_bytes"] - later["start_bytes"]).to_list() == [TEMP + KEPT] * 19
    # contiguous windows: each step starts holding what the one before ended with
    assert df["start_bytes"][1:].to_list() == df["end_bytes"][:-1].to_list()


def test_per_range_growth_is_the_kept_buffer():
    df = loaded(str(MEM)).gpu_memory(by="range")
    steps = df.filter(df["name"].str.starts_with("step ") & (df["name"] != "step 0"))
    assert steps.height == 19
    assert set(steps["growth_total_bytes"].to_list()) == {KEPT}
    assert set(steps["instances"].to_list()) == {1}


def test_cli_table_and_an_export_without_memory_events():
    r = CliRunner().invoke(main, ["gpu-memory", "--by", "iteration", "-f", "csv", str(MEM)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith("iteration,device_id,start_bytes,peak_bytes,end_bytes,growth_bytes")
    none = fixture("train_small")
    r = CliRunner().invoke(main, ["gpu-memory", str(none)])
    assert r.exit_code != 0
    assert "--cuda-memory-usage=true" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
