"""The `transfer bound` finding: copies between host and device memory fill at least half of a device's busy time
(nsysql/analyses/findings.py). Its figures are checked against copies crafted with known sizes and times, and
against the raw export where a real one is at hand; below the threshold it says nothing."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, gpu_waits_per_typical_step, loaded, raw

import nsysql
from nsysql.analyses.findings import Thresholds
from nsysql.cli import main

COPY_NS = 1_000_000  # each crafted copy: 1 ms, 32 MiB
COPY_BYTES = 32 * 2**20
PINNED, DEVICE = 1, 2  # ENUM_CUDA_MEM_KIND


def _union(intervals) -> int:
    """The length of the union of (start, end) intervals."""
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def _finding(prof, name="transfer bound", **limits) -> dict | None:
    f = prof.findings(Thresholds(**limits)).filter(pl.col("finding") == name)
    return f.row(0, named=True) if f.height else None


def test_transfer_bound_by_construction(tmp_path):
    """A copy of train_small without its own copies, given a pinned host-to-device copy of 32 MiB in 1 ms at
    the start of every steady-state step (before any of its kernels: nothing runs beside it), and one
    device-to-host copy over the exact span of one kernel (hidden). The copies fill 20 ms of the device's busy
    time (the kernels' union and the exposed copies): over half, so the finding holds with these figures; the
    advice is to overlap (pinned, exposed); the headroom is the exposed 1 ms of a typical step, at most the step's
    kernel time (what the copies could be hidden behind)."""
    src = fixture("train_small")
    base = loaded(str(src))
    steady = base.iterations().filter(~pl.col("warmup"))
    starts = [s + 100_000 for s in steady["start_ns"].to_list()]  # each step's first GPU op starts >= 1.1 ms in
    (ctx, stream, pid) = raw(src, "SELECT contextId, streamId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1")[0]
    kernels = raw(src, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 0')
    hidden = next(k for k in sorted(kernels) if k[0] > steady["start_ns"][1])  # a kernel of the second step
    insert = (
        'INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, "end", deviceId, contextId, streamId, globalPid, bytes, '
        "copyKind, srcKind, dstKind) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?)"
    )
    path = craft(
        tmp_path / "transfer.sqlite",
        "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        *[(insert, (s, s + COPY_NS, ctx, stream, pid, COPY_BYTES, 1, PINNED, DEVICE)) for s in starts],
        (insert, (*hidden, ctx, stream, pid, 4096, 2, DEVICE, PINNED)),
    )
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    n = len(starts)
    busy = _union(kernels + [(s, s + COPY_NS) for s in starts])
    filled, gpu_time = n * COPY_NS + hidden[1] - hidden[0], n * COPY_NS + hidden[1] - hidden[0]
    nbytes = n * COPY_BYTES + 4096
    row = _finding(prof)
    assert row is not None, prof.findings()["finding"].to_list()
    ev = row["evidence"]
    assert ev.startswith(
        f"copies between host and device memory fill {round(100 * filled / busy)}% of the GPU's busy time "
        f"({filled / 1e6:,.1f} ms of {busy / 1e6:,.1f} ms): {n + 1} copies ({n} to the device, 1 from it) move "
        f"{nbytes / 2**20:,.1f} MiB in {gpu_time / 1e6:,.1f} ms of GPU time ({nbytes / gpu_time:,.1f} GB/s), and "
        f"{n * COPY_NS / 1e6:,.1f} ms of their time ({n * COPY_NS / filled:.0%}) has no kernel beside it; "
        "100% of their bytes are in pinned host memory; overlap them with compute (tensor.to(device, "
        "non_blocking=True)"
    ), ev
    assert row["pool"] == "busy" and row["additive"]
    # every typical step holds one exposed copy, of which overlapping hides at most the step's kernel time
    its = prof.iterations().filter(~pl.col("warmup") & ~pl.col("outlier"))
    hide = [min(COPY_NS, k or 0) for k in its["kernel_ns"].to_list()]
    assert 0 < min(hide) and min(hide) < COPY_NS  # both bounds at work: train_small's steps run ~0.6 ms of kernels
    # and, the steps ending when the CPU is done, at most the time the CPU waited for the GPU in CUDA calls: the
    # copies added here have no call of their own, so the CPU's waits are train_small's (0.15 ms a step)
    waited = gpu_waits_per_typical_step(prof)
    assert waited < min(hide)
    assert row["headroom_ms"] == pytest.approx(min(sum(hide) / len(hide), waited) / 1e6, abs=1e-3)
    assert "CUDA memcpy trace" in row["needs"]
    # the CLI says the same
    out = CliRunner().invoke(main, ["summary", str(path), "--json"], env={"NSYSQL_CACHE_DIR": str(tmp_path / "cache")})
    assert out.exit_code == 0, out.output
    said = json.loads(out.stdout)["findings"]
    assert [f["evidence"] for f in said if f["finding"] == "transfer bound"] == [ev]


def test_silent_below_the_threshold_and_says_pinning_once():
    """train_small's own copies (46 pageable host-to-device, 40 MiB, and one device-to-host of 4 bytes: their
    bytes in the raw export) fill about a fifth of its GPU's busy time: no finding at the default 50%. At a
    threshold below their share it is made, and since most of their bytes are pageable, it names the pageable
    finding for the fix instead of saying it again; it is not made where they move fewer bytes than the floor."""
    assert raw(
        fixture("train_small"), "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (1, 2)"
    ) == [(42303616 + 4,)]
    prof = loaded(str(fixture("train_small")))
    assert _finding(prof) is None
    assert "transfer bound" not in prof.summary()["findings"]["finding"].to_list()
    row = _finding(prof, host_copy_share=0.1)
    assert row is not None
    assert row["evidence"].endswith(
        "100% of their bytes are in pageable host memory: the finding `pageable host-to-device copies` says how "
        "to pin it"
    )
    assert "pin_memory" not in row["evidence"]
    # nor where the copies move less than the fewest bytes worth a finding (a few bytes of arguments and results)
    assert _finding(prof, host_copy_share=0.1, host_copy_min_bytes=42303616 + 4 + 1) is None
    assert _finding(prof, host_copy_share=0.1, host_copy_min_bytes=42303616 + 4) is not None


EXPORT = PUBLIC / "GindaChen__nsys-ai__h100_2gpu_1s.sqlite"


@pytest.mark.skipif(not EXPORT.exists(), reason=f"{EXPORT} not present")
def test_transfer_bound_on_a_real_two_gpu_export():
    """A 1 s window of a 2-GPU FSDP run whose GPUs spend ~96% of their busy time in pinned host-to-device copies
    with no kernel beside them: the finding names both GPUs, with the copies' count, bytes and GPU time as the
    raw export holds them (CUPTI_ACTIVITY_KIND_MEMCPY, copyKind 1 and 2), and advises overlapping; without a
    loop it has no headroom. `nsysql summary` says it first."""
    prof = loaded(str(EXPORT))
    ((copies, to_device, nbytes, ns),) = raw(
        EXPORT,
        'SELECT count(*), sum(copyKind = 1), sum(bytes), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY '
        "WHERE copyKind IN (1, 2)",
    )
    # no kernel runs beside any of them, on either GPU
    assert raw(
        EXPORT,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.deviceId = m.deviceId "
        'AND k.start < m."end" AND k."end" > m.start WHERE m.copyKind IN (1, 2)',
    ) == [(0,)]
    # nor does one copy run beside another: their time on each GPU is their GPU time
    assert raw(
        EXPORT,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_MEMCPY o ON o.deviceId = m.deviceId "
        'AND o.rowid <> m.rowid AND o.start < m."end" AND o."end" > m.start '
        "WHERE m.copyKind IN (1, 2) AND o.copyKind IN (1, 2)",
    ) == [(0,)]
    row = _finding(prof)
    assert row is not None
    ev = row["evidence"]
    assert "% of GPU 0's busy time and " in ev and "% of GPU 1's busy time" in ev
    assert (
        f"{copies:,} copies ({to_device:,} to the device, {copies - to_device:,} from it) move "
        f"{nbytes / 2**30:,.1f} GiB in {ns / 1e6:,.1f} ms of GPU time ({nbytes / ns:,.1f} GB/s), and "
        f"{ns / 1e6:,.1f} ms of their time (100%) has no kernel beside it"
    ) in ev
    assert "overlap them with compute" in ev
    assert row["headroom_ms"] is None and row["headroom_basis"].startswith("no loop")
    out = CliRunner().invoke(main, ["summary", str(EXPORT)])
    assert out.exit_code == 0 and "transfer bound" in out.stdout


def test_copies_mostly_beside_kernels_say_how_to_hide_the_rest():
    """two_streams (fixtures/two_streams/COMMAND.md): each step's 32 MiB pinned host-to-device copy is enqueued on
    a side stream just before the step's GEMMs, so its head runs alone until the first GEMM starts and the rest
    beside the GEMMs. The finding's headroom is that exposed time (what overlapping could hide), yet its advice
    said `only copying less gives their time back`; it says that issuing the copies earlier hides it. No copy is
    pageable: the pageable finding is not made."""
    path = fixture("two_streams")
    prof = loaded(str(path))
    assert raw(path, "SELECT count(*), sum(srcKind = 1), sum(copyKind = 1) FROM CUPTI_ACTIVITY_KIND_MEMCPY") == [
        (12, 12, 12)
    ]
    copies = raw(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY')
    kernels = _union(raw(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL'))
    kernel_spans = raw(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL')
    both = _union(kernel_spans + copies)
    exposed = both - kernels  # copy time with no kernel beside it (no copy overlaps another)
    filled = _union(copies)
    assert 0 < exposed * 2 < filled  # mostly beside kernels, not wholly
    row = _finding(prof)
    assert row is not None
    ev = row["evidence"]
    assert f"and {exposed / 1e6:,.1f} ms of their time ({exposed / filled:.0%}) has no kernel beside it; " in ev
    assert ev.endswith(
        "100% of their bytes are in pinned host memory; issuing them earlier, while kernels run (a step's copies "
        "during the step before), hides the time with no kernel beside it; copying less (keep the data on the GPU "
        "across steps, or copy smaller dtypes) shortens all of it"
    ), ev
    assert row["headroom_ms"] > 0
    assert "pageable host-to-device copies" not in prof.findings()["finding"].to_list()
