"""NVTX payloads decoded by the export's own schema tables (nvtx_payloads, nvtx_payload_fields).

Known answers: the raw bytes of NVTX_EVENTS.binaryData unpacked here with struct, at the offsets and types that
the export's NVTX_PAYLOAD_SCHEMA_ENTRIES rows give, and strings looked up in StringIds by hand."""

from __future__ import annotations

import shutil
import sqlite3
import struct

import pytest
from conftest import FIXTURES, fixture, raw

import nsysql

DDP = FIXTURES / "ddp_blobs" / "rank0.sqlite"
# struct formats of the NVTX payload entry types these fixtures use (nvToolsExtPayload.h, LP64)
FORMATS = {5: "<i", 15: "<i", 16: "<I", 18: "<Q", 22: "<Q", 80: "<Q"}


def header(blob: bytes) -> list[tuple[int, int, int]]:
    """(schemaId, size, offset) of each payload: a uint64 count, then three uint64 per payload."""
    (n,) = struct.unpack_from("<Q", blob, 0)
    return [struct.unpack_from("<QQQ", blob, 8 + 24 * i) for i in range(n)]


def test_nccl_message_sizes_match_the_raw_bytes():
    schema_rows = raw(DDP, "SELECT schemaId, name, type, coalesce(offset, 0) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES")
    entries = {(s, name): (t, off) for s, name, t, off in schema_rows}
    events = raw(
        DDP,
        "SELECT n.start, n.end, s.value, n.binaryData FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE n.binaryData IS NOT NULL AND s.value IN ('ncclAllReduce', 'ncclBroadcast', 'ncclAllGather')",
    )
    expected = {}
    for start, end, name, blob in events:
        ((schema, size, off),) = header(blob)
        t, at = entries[schema, "Message size [bytes]"]
        (expected[start, end, name],) = struct.unpack_from(FORMATS[t], blob, off + at)
    assert len(expected) == 45  # COMMAND.md: 40 all-reduces, 4 broadcasts, 1 all-gather
    p = nsysql.load(DDP)
    got = p.sql(
        "SELECT e.start_ns, e.end_ns, e.name, f.int_value, f.value FROM nvtx_payloads e "
        "JOIN nvtx_payload_fields f USING (event_id, payload) WHERE f.field = 'Message size [bytes]'"
    )
    assert {(a, b, n): v for a, b, n, v, _ in got.iter_rows()} == expected
    assert all(str(v) == t for *_, v, t in got.iter_rows())
    # each decoded event is its nvtx_ranges row
    ranges = p.sql(
        "SELECT count(*) FROM nvtx_payloads e JOIN nvtx_ranges r USING (range_id) "
        "WHERE r.start_ns = e.start_ns AND r.end_ns = e.end_ns AND r.name = e.name AND r.domain = 'NCCL'"
    )
    assert ranges.item() == 48


def test_enum_labels_and_uint64_beyond_bigint():
    """The reduction op is an enum of the export (NVTX_PAYLOAD_ENUM_ENTRIES); the communicator id a uint64 above
    2^63, exact in `value`."""
    ((blob,),) = raw(
        DDP,
        "SELECT n.binaryData FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
        "WHERE s.value = 'ncclAllReduce' ORDER BY n.start LIMIT 1",
    )
    ((schema, _, off),) = header(blob)
    ((op_at, enum_id),) = raw(
        DDP, "SELECT offset, type FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE schemaId = ? AND idx = 2", schema
    )
    (op,) = struct.unpack_from("<i", blob, off + op_at)
    labels = {
        v or 0: n for n, v in raw(DDP, "SELECT name, value FROM NVTX_PAYLOAD_ENUM_ENTRIES WHERE schemaId = ?", enum_id)
    }
    (comm,) = struct.unpack_from("<Q", blob, off)
    assert comm >= 2**63  # the case BIGINT cannot hold
    rows = nsysql.load(DDP).sql(
        "SELECT f.field, f.int_value, f.value FROM nvtx_payload_fields f JOIN nvtx_payloads e USING (event_id, payload) "
        "WHERE e.name = 'ncclAllReduce' ORDER BY e.start_ns, f.entry LIMIT 3"
    )
    by = {r[0]: r[1:] for r in rows.iter_rows()}
    assert by["Reduction operation"] == (op, labels[op])
    assert by["NCCL communicator ID"] == (None, str(comm))


def test_python_sampling_frames_nested_array_of_string_handles():
    """nsys's Python sampling marks: a dynamic schema whose `Frames` entry is an array (length in `Frames count`)
    of an embedded schema of string handles and a line number."""
    path = fixture("loader_cpu_before")
    entries = raw(
        path,
        "SELECT s.name, e.idx, e.type, e.offset, e.arrayOrUnionDetail FROM NVTX_PAYLOAD_SCHEMA_ENTRIES e "
        "JOIN NVTX_PAYLOAD_SCHEMAS s USING (domainId, schemaId) WHERE s.name = 'Python Periodic Sampling'",
    )
    by_idx = {idx: (t, off or 0, detail) for _, idx, t, off, detail in entries}
    frame_type, frames_at, count_idx = by_idx[3]
    ((frame_size,),) = raw(path, "SELECT payloadSize FROM NVTX_PAYLOAD_SCHEMAS WHERE schemaId = ?", frame_type)
    frame = {
        n: (t, off or 0)
        for n, t, off in raw(
            path, "SELECT name, type, offset FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE schemaId = ?", frame_type
        )
    }
    strings = dict(raw(path, "SELECT id, value FROM StringIds"))
    blobs = raw(
        path,
        "SELECT start, globalTid, binaryData FROM NVTX_EVENTS WHERE binaryData IS NOT NULL ORDER BY start, globalTid",
    )
    expected = []
    for start, gtid, blob in blobs:
        ((_, _, off),) = header(blob)
        t, at, _ = by_idx[count_idx]
        (n,) = struct.unpack_from(FORMATS[t], blob, off + at)
        for k in range(n):
            base = off + frames_at + k * frame_size
            (fn,) = struct.unpack_from(FORMATS[frame["Function"][0]], blob, base + frame["Function"][1])
            (line,) = struct.unpack_from(FORMATS[frame["Line"][0]], blob, base + frame["Line"][1])
            expected.append((start, gtid % 2**24, k, strings[fn], line))
    assert len(blobs) == 1298 and len(expected) > 5 * len(blobs)
    got = nsysql.load(path).sql(
        "SELECT e.start_ns, e.tid, fn.element, fn.value, ln.int_value FROM nvtx_payloads e "
        "JOIN nvtx_payload_fields fn ON fn.event_id = e.event_id AND fn.field = 'Frames.Function' "
        "JOIN nvtx_payload_fields ln ON ln.event_id = e.event_id AND ln.field = 'Frames.Line' "
        "AND ln.element = fn.element WHERE e.event = 'mark'"
    )
    assert sorted(got.iter_rows()) == sorted(expected)


def test_export_without_payload_bytes_has_empty_tables():
    """fixtures/ddp_pair: the same program exported without --include-blobs (schemas present, no bytes)."""
    p = nsysql.load(FIXTURES / "ddp_pair" / "rank0.sqlite")
    assert p.sql("SELECT count(*) FROM nvtx_payloads").item() == 0
    assert p.sql("SELECT count(*) FROM nvtx_payload_fields").item() == 0


@pytest.mark.parametrize(
    "blob_sql",
    [
        "substr(binaryData, 1, 40)",  # cut inside the payload
        "X'FFFFFFFFFFFFFFFF' || substr(binaryData, 9)",  # a count far beyond the bytes
        "X'01'",  # shorter than the header
    ],
)
def test_damaged_payload_bytes_are_left_out_not_guessed(tmp_path, blob_sql):
    path = tmp_path / "rank0.sqlite"
    shutil.copy(DDP, path)
    con = sqlite3.connect(path)
    first = "(SELECT min(start) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL)"
    con.execute(f"UPDATE NVTX_EVENTS SET binaryData = {blob_sql} WHERE start = {first}")
    con.commit()
    con.close()
    p = nsysql.load(path)
    first_event = p.sql("SELECT min(event_id) FROM nvtx_payloads").item()
    assert p.sql(f"SELECT count(*) FROM nvtx_payload_fields WHERE event_id = {first_event}").item() == 0
    assert not p.sql(
        f"SELECT bool_or(coalesce(decoded, false)) FROM nvtx_payloads WHERE event_id = {first_event}"
    ).item()
    # the other 47 events decode as ever
    assert p.sql("SELECT count(DISTINCT event_id) FROM nvtx_payload_fields").item() == 47
