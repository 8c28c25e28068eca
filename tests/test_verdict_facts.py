"""Facts a verdict rests on, true on every GPU and nsys version (issue 31): memory kinds of copies, compute
capability and frameworks behind the advice, and the capture switch that would answer what an export cannot."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from conftest import PUBLIC, fixture, loaded, public_exports

# nsys's own numbering of srcKind/dstKind/memKind, as ENUM_CUDA_MEM_KIND names ids 0-3 in every export that has
# it and nsys 2021.1's stats scripts decoded them (MEM_KIND_STRS_CTE): the same ids in every version
NSYS_MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array"}
HTOD, DTOH = 1, 2  # CUPTI_ACTIVITY_KIND_MEMCPY.copyKind


def public(name: str):
    p = PUBLIC / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def raw_copies(path) -> list[tuple[int, int, int, int, int]]:
    """(copyKind, srcKind, dstKind, count, bytes) of the export's memcpy rows, read with Python's sqlite3."""
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute(
            "SELECT copyKind, srcKind, dstKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3"
        ).fetchall()


def decoded_copies(path) -> dict[tuple[str, str, str], tuple[int, int]]:
    got = loaded(str(path)).sql(
        "SELECT copy_kind::VARCHAR, src_kind::VARCHAR, dst_kind::VARCHAR, count(*), sum(bytes)::BIGINT "
        "FROM gpu_ops WHERE kind = 'memcpy' GROUP BY ALL"
    )
    return {r[:3]: r[3:] for r in got.iter_rows()}


def has_table(path, table: str) -> bool:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


DIRECTION = {HTOD: "Host-to-Device", DTOH: "Device-to-Host"}


@pytest.mark.parametrize(
    "name, want",
    [
        # OpenACC k-means (nsys of HPC SDK 21.2): pinned buffers both ways
        ("martisu1631998__kmeans-parallel__report2.sqlite", {("Host-to-Device", "Pinned", "Device")}),
        # 2020.3.4 (OpenMP offload on V100s) and 2021.2.1: plain pageable cudaMemcpy both ways
        ("lockfuehrer__beast_ressoruces__report2.sqlite", {("Host-to-Device", "Pageable", "Device")}),
        ("bwyogatama__Mordred-Deprecated__report1.sqlite", {("Host-to-Device", "Pageable", "Device")}),
    ],
)
def test_copies_of_exports_without_the_enum_decode_by_nsys_numbering(name, want):
    """Exports without ENUM_CUDA_MEM_KIND store nsys's numbering (0 Pageable, 1 Pinned, 2 Device), not CUPTI's
    (where 2 is Pinned and 3 Device): each raw (copyKind, srcKind, dstKind) group is decoded by it, bytes and
    counts kept; and a copy between host and device has the device at its device end, true by construction."""
    path = public(name)
    assert not has_table(path, "ENUM_CUDA_MEM_KIND")
    raw = raw_copies(path)
    want_all = {(DIRECTION[c], NSYS_MEM_KINDS[s], NSYS_MEM_KINDS[d]): (n, b) for c, s, d, n, b in raw if c in DIRECTION}
    got = decoded_copies(path)
    assert got == want_all
    assert want <= set(got)
    for (direction, src, dst), _ in got.items():
        assert (dst if direction == "Host-to-Device" else src) == "Device"
        assert (src if direction == "Host-to-Device" else dst) in ("Pageable", "Pinned")


def test_pinned_copies_are_no_pageable_finding():
    """k-means copies 1,613.7 MiB host-to-device from pinned memory (raw srcKind 1): no pageable finding."""
    path = public("martisu1631998__kmeans-parallel__report2.sqlite")
    htod = [r for r in raw_copies(path) if r[0] == HTOD]
    assert {(s, d) for _, s, d, _, _ in htod} == {(1, 2)}
    findings = loaded(str(path)).findings()
    assert "pageable host-to-device copies" not in findings["finding"].to_list()


def test_pageable_copies_are_found_in_an_export_without_the_enum():
    """beast_ressoruces (2020.3.4) copies 118 MiB device-to-host and 4 bytes host-to-device from pageable memory:
    the host-to-device bytes are far under the finding's 1 MiB, so summary's memory table shows them and no
    finding is made; Mordred's 45 pageable host-to-device copies are 123 KiB, also under it."""
    for name in ("lockfuehrer__beast_ressoruces__report2.sqlite", "bwyogatama__Mordred-Deprecated__report1.sqlite"):
        path = public(name)
        prof = loaded(str(path))
        raw = [r for r in raw_copies(path) if r[0] == HTOD and r[1] == 0]
        pc = prof.sql(
            "SELECT count(*), sum(bytes)::BIGINT FROM gpu_ops WHERE kind = 'memcpy' "
            "AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable'"
        ).row(0)
        assert pc == (sum(r[3] for r in raw), sum(r[4] for r in raw)) and pc[0] > 0


@pytest.mark.parametrize("path", public_exports(), ids=lambda p: p.name[:40])
def test_host_device_copies_have_the_device_at_their_device_end(path):
    """In every public export, 2020.3 to 2026.2, with or without the enum: a host-to-device copy writes device
    memory and a device-to-host copy reads it. (CUPTI's numbering, the old fallback, made them Pinned.)"""
    got = loaded(str(path)).sql(
        "SELECT copy_kind::VARCHAR, src_kind::VARCHAR, dst_kind::VARCHAR FROM gpu_ops "
        "WHERE copy_kind IN ('Host-to-Device', 'Device-to-Host') GROUP BY ALL"
    )
    for direction, src, dst in got.iter_rows():
        assert (dst if direction == "Host-to-Device" else src) == "Device", (direction, src, dst)


def _mutated_train_small(tmp_path, sql: str):
    dst = tmp_path / "train_small.sqlite"
    shutil.copyfile(fixture("train_small"), dst)
    with sqlite3.connect(dst) as db:
        db.executescript(sql)
    return dst


def test_exports_with_the_enum_decode_by_it(tmp_path):
    """train_small (nsys 2025) has ENUM_CUDA_MEM_KIND: a copy whose enum says id 0 is Pinned and id 1 Pageable (the
    labels swapped) decodes by that enum, not by any numbering nsysql knows."""
    import nsysql

    path = fixture("train_small")
    raw = raw_copies(path)
    assert has_table(path, "ENUM_CUDA_MEM_KIND") and {s for c, s, _, _, _ in raw if c == HTOD} == {0}
    swapped = _mutated_train_small(
        tmp_path,
        "UPDATE ENUM_CUDA_MEM_KIND SET label = CASE id WHEN 0 THEN 'Pinned' WHEN 1 THEN 'Pageable' ELSE label END;",
    )
    got = nsysql.load(str(swapped)).sql(
        "SELECT DISTINCT src_kind::VARCHAR FROM gpu_ops WHERE copy_kind = 'Host-to-Device'"
    )
    assert got.rows() == [("Pinned",)]
    assert {k[1] for k in decoded_copies(path) if k[0] == "Host-to-Device"} == {"Pageable"}


def test_an_export_without_its_enum_decodes_as_the_enum_said(tmp_path):
    """The same export with its ENUM_CUDA_MEM_KIND dropped decodes every copy and memset to the same kinds: ids 0-3
    mean the same in nsys's numbering before the enum and in it."""
    import nsysql

    q = (
        "SELECT kind::VARCHAR, copy_kind::VARCHAR, src_kind::VARCHAR, dst_kind::VARCHAR, count(*) "
        "FROM gpu_ops WHERE kind <> 'kernel' GROUP BY ALL ORDER BY ALL"
    )
    with_enum = loaded(str(fixture("train_small"))).sql(q).rows()
    without = nsysql.load(str(_mutated_train_small(tmp_path, "DROP TABLE ENUM_CUDA_MEM_KIND;"))).sql(q).rows()
    assert without == with_enum and any(r[2] == "Pageable" for r in with_enum)
