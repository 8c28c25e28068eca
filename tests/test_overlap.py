"""Communication hidden or exposed, and the step's time partition: checked against the kernel intervals
themselves, merged and intersected here in Python, and against facts true by construction."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import fixture, h200_exports, loaded, own_exports

from nsysql.cli import main
from nsysql.errors import NsysqlError

RANKS = [fixture("ddp_pair").parent / f"rank{r}.sqlite" for r in (0, 1)]


def union(intervals):
    """The union of (start, end) intervals, merged where they overlap or touch."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(stretches, lo=None, hi=None):
    """Total length of merged stretches, clipped to [lo, hi) when given."""
    total = 0
    for s, e in stretches:
        s, e = (s, e) if lo is None else (max(s, lo), min(e, hi))
        total += max(e - s, 0)
    return total


def layers(prof, device):
    """The device's compute kernels, communication kernels (NCCL, by name), all kernels and all ops, merged."""
    ops = prof.sql(
        f"SELECT kind::VARCHAR AS kind, start_ns, end_ns, name FROM gpu_ops_named WHERE device_id = {device}"
    ).rows()
    comm = [(s, e) for k, s, e, n in ops if k == "kernel" and "nccl" in n.lower()]
    compute = [(s, e) for k, s, e, n in ops if k in ("kernel", "graph") and "nccl" not in n.lower()]
    return {
        "comm": union(comm),
        "compute": union(compute),
        "kernels": union(comm + compute),
        "all": union([(s, e) for _, s, e, _ in ops]),
    }


@pytest.mark.parametrize("path", RANKS, ids=lambda p: p.name)
def test_overlap_equals_the_kernel_intervals(path):
    prof = loaded(str(path))
    got = prof.overlap()
    assert got.columns == ["device_id", "comm_ns", "overlapped_ns", "exposed_ns", "compute_ns"]
    assert got.height == 1  # one GPU per rank
    row = got.row(0, named=True)
    lay = layers(prof, row["device_id"])
    comm, compute = lay["comm"], lay["compute"]
    # overlapped: the intersection of the two unions, walked here pairwise
    both = sum(max(min(a[1], b[1]) - max(a[0], b[0]), 0) for a in comm for b in compute)
    assert row["comm_ns"] == length(comm) > 0
    assert row["compute_ns"] == length(compute)
    assert row["overlapped_ns"] == both
    assert row["exposed_ns"] == length(comm) - both
    assert row["overlapped_ns"] + row["exposed_ns"] == row["comm_ns"]
    assert 0 <= row["exposed_ns"] <= row["comm_ns"]


@pytest.mark.parametrize("path", RANKS, ids=lambda p: p.name)
def test_partition_per_iteration_equals_the_intervals(path):
    prof = loaded(str(path))
    its = prof.iterations()
    dev = prof.overlap()["device_id"][0]
    lay = layers(prof, dev)
    for r in its.iter_rows(named=True):
        lo, hi = r["start_ns"], r["end_ns"]
        compute, kernels, busy = (length(lay[k], lo, hi) for k in ("compute", "kernels", "all"))
        assert r["compute_ns"] == compute
        assert r["exposed_comm_ns"] == kernels - compute
        assert r["copy_ns"] == busy - kernels
        assert r["idle_ns"] == r["wall_ns"] - busy
        assert r["comm_ns"] == length(lay["comm"], lo, hi)
        assert r["overlapped_ns"] + r["exposed_comm_ns"] == r["comm_ns"]
    per = prof.overlap(by="iteration")
    assert per.columns == ["iteration", "device_id", "comm_ns", "overlapped_ns", "exposed_ns", "compute_ns"]
    assert per["exposed_ns"].to_list() == its["exposed_comm_ns"].to_list()
    assert (per["device_id"] == dev).all()


PARTITIONED = own_exports() + h200_exports()
LOOP = {"ops_mlp.sqlite": "Forward Pass"}  # its outermost ranges are one Batch0 and six passes of each kind


@pytest.mark.parametrize("path", PARTITIONED, ids=[f"{p.parent.name}/{p.name}" for p in PARTITIONED])
def test_partition_adds_up_to_the_wall_time(path):
    its = loaded(str(path)).iterations(range=LOOP.get(path.name))
    parts = ("compute_ns", "exposed_comm_ns", "copy_ns", "idle_ns")
    assert its.height
    for r in its.iter_rows(named=True):
        assert sum(r[p] for p in parts) == r["wall_ns"], r["iteration"]
        assert all(r[p] >= 0 for p in parts)
        assert 0 <= r["overlapped_ns"] <= r["comm_ns"]


def test_no_communication_says_so_in_one_line():
    path = str(fixture("train_small"))
    with pytest.raises(NsysqlError, match="no communication kernels"):
        loaded(path).overlap()
    for args in (["overlap", path], ["overlap", path, "--by", "iteration"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2
        assert r.output.count("\n") == 1 and "no communication kernels" in r.output and path in r.output


def test_summary_and_ranks_show_exposed_communication():
    """rank 0 of ddp_pair waits inside AllReduce for rank 1, which sleeps in `data` (fixtures/README.md): its
    exposed communication is a large share of its steps, a finding; rank 1's is small, no finding."""
    import nsysql

    shares = {}
    for path in RANKS:
        prof = loaded(str(path))
        steady = prof.iterations().filter(~pl.col("warmup"))
        share = 100.0 * steady["exposed_comm_ns"].sum() / steady["wall_ns"].sum()
        shares[path.name] = share
        summ = prof.summary()
        fact = dict(summ["facts"].select("key", "value").rows())["exposed_comm"]
        assert fact.startswith(f"{share:.1f}% of the steady-state iterations' wall time")
        found = "exposed communication" in summ["findings"]["finding"].to_list()
        assert found == (share >= 20.0)
    assert shares["rank0.sqlite"] >= 20.0 > shares["rank1.sqlite"]
    # one process, the session's cache (the entries `loaded` read): the same frames
    per = nsysql.load_many(RANKS, workers=1).per_rank().sort("rank")
    assert per["exposed_comm_pct"].to_list() == pytest.approx([shares["rank0.sqlite"], shares["rank1.sqlite"]])
    assert "exposed_comm" not in dict(
        loaded(str(fixture("train_small"))).summary()["facts"].select("key", "value").rows()
    )


def test_exposed_communication_does_not_promise_what_a_wait_keeps():
    """By construction rank 0 of ddp_pair waits inside AllReduce for rank 1 (fixtures/README.md): its exposed
    communication is that wait, which overlapping hides nothing of. One rank's export cannot tell a wait from a
    transfer, so the finding says both, and where the rank waited for is named; its headroom is said as the upper
    bound it is. It said the share alone, and its basis `(upper bound)`, as if overlap gave it all back."""
    f = loaded(str(RANKS[0])).findings().filter(pl.col("finding") == "exposed communication").row(0, named=True)
    assert "waits in the collective for a slower rank" in f["evidence"]
    assert "`nsysql ranks` over one export per rank" in f["evidence"]
    assert "as if none of it waited for a slower rank" in f["headroom_basis"]
