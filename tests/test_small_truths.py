"""Small sentences that must be true on profiles unlike ours: GPU activity recorded but all left out as flawed,
NVTX ranges without a name, MPI rank numbers no MPI rank can be, a data-loader thread name in the process that
owns the GPU, NVTX without GPU activity. Each on a crafted copy of a small fixture, built once."""

from __future__ import annotations

import pytest
from conftest import craft, raw

import nsysql

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


@pytest.fixture(scope="module")
def flawed_gpu(tmp_path_factory):
    """train_small with every kernel and copy ending before it starts: recorded, and all left out."""
    d = tmp_path_factory.mktemp("flawed")
    path = craft(d / "flawed.sqlite", *(f'UPDATE {t} SET "end" = "start" - 1' for t in GPU_TABLES[:2]))
    prof = nsysql.load(path, cache_dir=d / "cache")
    yield path, prof
    prof.close()


def test_gpu_activity_all_left_out_is_not_said_untraced(flawed_gpu):
    path, prof = flawed_gpu
    recorded = sum(raw(path, f'SELECT count(*) FROM {t} WHERE "end" < "start"')[0][0] for t in GPU_TABLES[:2])
    assert recorded > 0
    facts = {k: v for k, _, v in prof.summary()["facts"].iter_rows()}
    said = f"the export's {recorded:,} rows of GPU activity were all left out"
    for key in ("gpus", "step"):
        assert said in facts[key] and "no GPU activity" not in facts[key], facts[key]
        assert "traced" not in facts[key], facts[key]
    cards = {label: (value, detail) for label, value, detail in prof.report()["cards"].iter_rows()}
    value, detail = cards["GPUs"]
    assert value == "none usable" and said in detail, cards["GPUs"]
