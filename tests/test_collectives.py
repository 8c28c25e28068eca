"""`nsysql collectives` / Profile.collectives on fixtures/ddp_blobs (2-rank DDP, exported with --include-blobs=true).

Known answers: the payload bytes and kernel rows of the export read here with sqlite3 and struct; the program's
parameters (fixtures/workloads/ddp_straggler.py: Linear(1024, 4096), SiLU, Linear(4096, 1024) in float32), all
gradients all-reduced once per step by DDP; rank 1 sleeping 30 ms in `data` on steps i % 5 == 2."""

from __future__ import annotations

import json
import struct

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, built_cache, craft, raw

import nsysql
from nsysql.cli import main

RANK0 = FIXTURES / "ddp_blobs" / "rank0.sqlite"
RANK1 = FIXTURES / "ddp_blobs" / "rank1.sqlite"
# float32 weights and biases of Linear(1024, 4096) and Linear(4096, 1024)
PARAM_BYTES = 4 * (1024 * 4096 + 4096 + 4096 * 1024 + 1024)
STRAGGLER_STEPS = {2, 7, 12, 17}


def payload_field(path, blob: bytes, field: str) -> int:
    """A field of the (single) payload of an event's binaryData, unpacked at the offset its schema row gives."""
    (_, schema, _, off) = struct.unpack_from("<QQQQ", blob, 0)
    ((at, t),) = raw(
        path, "SELECT offset, type FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE schemaId = ? AND name = ?", schema, field
    )
    return struct.unpack_from({5: "<i", 22: "<Q"}[t], blob, off + at)[0]


def test_bus_bandwidth_of_one_call_by_hand():
    """The 7th all-reduce on rank 0: message size from its payload, ranks from the communicator's init payload,
    its kernel from CUPTI (launched by a runtime call on the range's thread while it was open)."""
    ar = raw(
        RANK0,
        "SELECT n.start, n.end, n.globalTid, n.binaryData FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE s.value = 'ncclAllReduce' ORDER BY n.start",
    )
    start, end, gtid, blob = ar[6]
    size = payload_field(RANK0, blob, "Message size [bytes]")
    ((init,),) = raw(
        RANK0,
        "SELECT n.binaryData FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE s.value LIKE 'ncclCommInitRank%'",
    )
    n = payload_field(RANK0, init, "No. of ranks")
    ((k_start, k_end),) = raw(
        RANK0,
        "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "USING (correlationId) WHERE r.globalTid = ? AND r.start >= ? AND r.start < ?",
        gtid,
        start,
        end,
    )
    busbw = size / (k_end - k_start) * 2 * (n - 1) / n  # bytes per ns = GB/s; all-reduce: 2(n-1)/n
    calls = nsysql.load(RANK0).collectives(by="call")
    row = calls.filter(calls["start_ns"] == start).row(0, named=True)
    assert (row["kind"], row["bytes"], row["ranks"], row["op"]) == ("AllReduce", size, n, "Sum")
    assert row["gpu_ns"] == k_end - k_start
    assert row["busbw_gbps"] == pytest.approx(busbw, rel=1e-12)
    assert row["algbw_gbps"] == pytest.approx(size / (k_end - k_start), rel=1e-12)


def test_every_step_all_reduces_the_parameters_bytes():
    calls = nsysql.load(RANK0).collectives(by="call")
    ar = calls.filter((calls["kind"] == "AllReduce") & calls["iteration"].is_not_null())
    per_step = dict(ar.group_by("iteration").agg(pl.col("bytes").sum()).iter_rows())
    assert per_step == {i: PARAM_BYTES for i in range(20)}


def test_the_slow_calls_are_the_ones_that_waited_for_the_straggler():
    """On rank 0, the first all-reduce bucket of steps 2, 7, 12, 17 waits ~30 ms for rank 1: those and only those
    fall below half the median bus bandwidth of their size."""
    p = nsysql.load(RANK0)
    calls = p.collectives(by="call")
    f = p.collective_findings().row(0, named=True)
    med = calls.group_by("kind", "bytes").agg(pl.col("busbw_gbps").median().alias("med"), pl.len().alias("n"))
    joined = calls.join(med, on=["kind", "bytes"])
    slow = joined.filter((joined["n"] >= 3) & (joined["busbw_gbps"] < 0.5 * joined["med"]))
    assert set(slow["iteration"]) == STRAGGLER_STEPS and slow.height == 4
    assert f["slow_calls"] == 4 and "4 of 19 AllReduce" in f["evidence"]
    # the time given back: each slow call's GPU time beyond its size's median
    group_med = joined.filter(pl.col("kind") == "AllReduce").group_by("bytes").agg(pl.col("gpu_ns").median())
    m = dict(group_med.iter_rows())
    assert f["extra_ms"] == pytest.approx(sum(g - m[b] for g, b in slow.select("gpu_ns", "bytes").iter_rows()) / 1e6)
    # a stricter ratio flags none: the finding is silent, its rule still stated
    none = p.collective_findings(slow_ratio=0.05).row(0, named=True)
    assert none["slow_calls"] == 0 and none["evidence"] is None and "5%" in none["rule"]


def test_across_ranks_the_straggler_arrives_last_by_its_sleep():
    r = CliRunner().invoke(main, ["collectives", str(RANK0), str(RANK1), "--by", "rank", "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    skew = out["skew"]
    assert len(skew) == 45  # every call of rank 0 has its match on rank 1
    waited = [s for s in skew if s["iteration"] in STRAGGLER_STEPS and s["kind"] == "AllReduce"]
    assert {s["last_rank"] for s in waited} == {1}
    assert max(s["skew_ns"] for s in waited) >= 30_000_000  # the 30 ms sleep
    others = [s["skew_ns"] for s in skew if s["iteration"] not in STRAGGLER_STEPS]
    assert max(others) < 30_000_000
    by_rank = {row["rank"]: row for row in out["collectives"]}
    assert by_rank[1]["last_arrivals"] == sum(s["last_rank"] == 1 for s in skew)


def test_across_ranks_with_payloads_no_rank_is_answered_as_one_file(tmp_path):
    """`collectives FILE FILE` over exports whose calls carry their sizes compares the ranks' calls: it makes no
    rank's one-file answer (collectives_shown: its table by kind and its slow-size findings, which the comparison
    never shows) only to learn that the rank has sizes. What a command makes is stored beside the export's entry
    (nsysql.store.answers), so the cache holds what it asked."""
    cache = built_cache(tmp_path / "c", RANK0, RANK1)
    r = CliRunner().invoke(main, ["--cache-dir", str(cache), "collectives", str(RANK0), str(RANK1), "--by", "rank"])
    assert r.exit_code == 0, r.output
    made = {d.name.rsplit("-", 1)[0] for d in cache.glob("*.results/*-*")}
    assert "collectives" in made  # the calls compared
    assert not made & {"collectives_shown", "collective_findings"}, made


def test_the_python_answer_across_ranks_is_what_the_command_prints(tmp_path):
    """nsysql.collectives(paths) is `nsysql collectives FILE FILE`: its frames are the command's JSON, its `said`
    the lines under the table, with payloads (the skew) and without (each rank's note); its refusal is the
    command's sentence, naming the argument as Python passes it (`by=iteration`) where the command names its flag
    (`--by iteration`)."""
    pair = [FIXTURES / "ddp_pair" / f"rank{i}.sqlite" for i in (0, 1)]
    cache = built_cache(tmp_path / "c", RANK0, RANK1, *pair)

    def cli(*args):
        return CliRunner().invoke(main, ["--cache-dir", str(cache), "collectives", *map(str, args)])

    for files, by, shown in (
        ([RANK0, RANK1], "rank", {"collectives", "skew"}),
        (pair, "kind", {"collectives", "note"}),
    ):
        got = nsysql.collectives(files, by=by, cache_dir=cache)
        printed = json.loads(cli(*files, "--by", by, "-f", "json").stdout)
        assert set(printed) == shown
        assert {k: got[k].to_dicts() for k in shown} == printed
        table = cli(*files, "--by", by, "--wide")
        assert table.exit_code == 0 and table.stdout.endswith(f"\n\n{got['said']}\n")
    assert got["said"].startswith("rank 0 (rank0.sqlite): 45 NCCL kernels")
    with pytest.raises(nsysql.NsysqlError) as e:
        nsysql.collectives(pair, by="iteration", cache_dir=cache)
    refused = cli(*pair, "--by", "iteration")
    assert str(e.value).startswith("`by=iteration` needs NCCL's NVTX payloads") and "--by" not in str(e.value)
    assert refused.exit_code == 2
    assert refused.stderr.splitlines()[-1] == "nsysql: error: " + str(e.value).replace("`by=", "`--by ")


def test_without_payload_bytes_says_how_to_export_them():
    """fixtures/ddp_pair: the same program exported without --include-blobs. Per call (sizes are the answer)
    refused; per kind the kernels' names answer (tests/test_graphs_said.py)."""
    pair = FIXTURES / "ddp_pair" / "rank0.sqlite"
    r = CliRunner().invoke(main, ["collectives", str(pair), "--by", "call"])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert str(pair) in line and "nsys export --type sqlite --include-blobs=true -o X.sqlite X.nsys-rep" in line
    info = CliRunner().invoke(main, ["info", str(pair), "-f", "csv"])
    rows = [ln for ln in info.stdout.splitlines() if "binaryData" in ln]
    assert any(ln.startswith("lacks,") and "--include-blobs=true" in ln for ln in rows)
    assert any(ln.startswith('commands,collectives,"yes: per collective kind from the NCCL kernels') for ln in rows)
    # with the bytes, neither line
    blobs = CliRunner().invoke(main, ["info", str(RANK0), "-f", "csv"]).stdout
    assert "binaryData" not in blobs and "commands,collectives,yes" in blobs


def test_without_nccl_says_there_are_no_collectives():
    path = FIXTURES / "train_small" / "train_small.sqlite"
    r = CliRunner().invoke(main, ["collectives", str(path)])
    assert r.exit_code == 2
    assert "no NCCL collectives" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_several_files_refuse_a_slow_ratio_rather_than_ignore_it():
    """--slow-ratio judges one rank's calls (the findings of one FILE); over several FILEs the answer is the skew
    across ranks, which it does not change: given there, it is refused in one line, not silently dropped."""
    r = CliRunner().invoke(main, ["collectives", str(RANK0), str(RANK1), "--slow-ratio", "0.3"])
    assert r.exit_code == 2
    assert "--slow-ratio" in r.stderr and "several FILEs" in r.stderr


@pytest.mark.parametrize(
    "damage, why",
    [
        (
            "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, length(binaryData) / 2) "
            "WHERE binaryData IS NOT NULL",
            "with a header that promises more than the event's bytes hold",
        ),
        (
            "DELETE FROM NVTX_PAYLOAD_SCHEMAS",
            "with a schema that NVTX_PAYLOAD_SCHEMAS does not declare, or bytes that end before the payload does",
        ),
    ],
)
def test_payloads_that_do_not_decode_are_said_so_and_kernels_answer(tmp_path, damage, why):
    """ddp_blobs rank 0 with its payloads cut in half, or their schemas gone: NCCL's ranges carry payloads of which
    none decodes. Per call it refused saying the ranges carry no message size in their payloads; now it says none
    decodes and why, counting the NCCL ranges with payload bytes, and per kind the kernels' names answer, as where
    the export left the bytes out."""
    path = craft(tmp_path / "damaged.sqlite", damage, source=RANK0)
    # every payload of ddp_blobs is NCCL's, on a range
    ((n,),) = raw(path, "SELECT count(*) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL AND eventType IN (59, 60)")
    runner = CliRunner()
    r = runner.invoke(main, ["--no-cache", "collectives", str(path), "--by", "call"])
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.strip().splitlines()
    assert line.endswith(
        f"NCCL's ranges carry payloads, but none that can be decoded ({n} {why}), so no collective can be measured"
    )
    r = runner.invoke(main, ["--no-cache", "collectives", str(path), "-f", "json"])
    assert r.exit_code == 0, r.output
    assert {row["kind"] for row in json.loads(r.stdout)["collectives"]} == {"AllReduce", "Broadcast", "AllGather"}
