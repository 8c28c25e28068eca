"""Python frames from nsys's Python sampling (NVTX marks of the domain `Python Periodic Sampling`, payloads
decoded by nvtx_payload_fields), on fixtures/loader_cpu_before (recorded with --python-sampling=true, exported with
--include-blobs=true, COMMAND.md)."""

from __future__ import annotations

import io
import sqlite3

import polars as pl
from click.testing import CliRunner
from conftest import craft, fixture, loaded

import nsysql
from nsysql.cli import main

BEFORE = fixture("loader_cpu_before")


def raw(sql):
    con = sqlite3.connect(f"file:{BEFORE}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_python_samples_per_thread_equal_the_raw_marks():
    want = raw(
        "SELECT (n.globalTid >> 24) & 16777215, n.globalTid & 16777215, count(*) FROM NVTX_EVENTS n "
        "JOIN NVTX_EVENTS d ON d.eventType = 75 AND d.text = 'Python Periodic Sampling' AND d.domainId = n.domainId "
        "AND (d.globalTid >> 24) = (n.globalTid >> 24) WHERE n.eventType <> 75 GROUP BY 1, 2"
    )
    got = loaded(str(BEFORE)).sql("SELECT pid, tid, count(*) FROM python_samples GROUP BY 1, 2").rows()
    assert sorted(got) == sorted(want)


def test_frames_are_unescaped_and_counted():
    p = loaded(str(BEFORE))
    assert raw("SELECT count(*) FROM StringIds WHERE value = '&lt;module&gt;'")[0][0] == 1
    names = set(p.sql("SELECT DISTINCT function FROM python_frames")["function"].to_list())
    assert "<module>" in names and not any("&lt;" in n for n in names)
    # each sample holds as many frames as its own `Frames count` says
    bad = p.sql(
        "SELECT count(*) FROM python_samples s WHERE s.frames <> "
        "(SELECT count(*) FROM python_frames f WHERE f.sample_id = s.sample_id)"
    ).item()
    assert bad == 0


def test_the_main_thread_waits_inside_the_data_loader():
    # by construction the loop waits for each large batch in DataLoader's __next__ -> _next_data -> _get_data
    meanwhile = loaded(str(BEFORE)).summary()["facts"].filter(pl.col("key") == "meanwhile")["value"][0]
    assert "in Python it was in `_try_get_data ← _get_data ← _next_data` (utils/data/dataloader.py)" in meanwhile


def test_cpu_by_python():
    res = CliRunner().invoke(main, ["cpu", str(BEFORE), "--by", "python", "-f", "csv"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    total = raw(
        "SELECT count(*) FROM NVTX_EVENTS n JOIN NVTX_EVENTS d ON d.eventType = 75 "
        "AND d.text = 'Python Periodic Sampling' AND d.domainId = n.domainId WHERE n.eventType <> 75"
    )[0][0]
    df = pl.read_csv(io.StringIO(res.stdout))
    assert df["samples"].sum() == total
    none = CliRunner().invoke(main, ["cpu", str(fixture("train_small")), "--by", "python"])
    assert none.exit_code == 2 and "--python-sampling=true" in none.stderr


def test_python_marks_whose_payloads_do_not_decode_are_said_so(tmp_path):
    """loader_cpu_before with every payload cut to two thirds of its bytes: the Python samples' marks are there,
    with their bytes, and none decodes. `cpu --by python` says so, counting them; it said to export the report
    again with --include-blobs=true, as though the bytes had been left out."""
    cut = "UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, length(binaryData) * 2 / 3) WHERE binaryData NOT NULL"
    path = craft(tmp_path / "cut.sqlite", cut, source="loader_cpu_before")
    # every payload of the fixture is a Python sample's, on a mark
    (marks,) = raw("SELECT count(*) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL AND eventType = 34")[0]
    r = CliRunner().invoke(main, ["--no-cache", "cpu", "--by", "python", str(path)])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().splitlines() == [
        f"nsysql: error: {path}: no Python samples in this export: nsys sampled Python, its marks carry payloads, "
        f"but none that can be decoded ({marks:,} with a schema that NVTX_PAYLOAD_SCHEMAS does not declare, or bytes "
        "that end before the payload does)"
    ]


def test_a_python_frame_whose_name_stringids_lacks_is_no_number(tmp_path):
    """loader_cpu_before without the string `_try_get_data` in StringIds: the frames that named it hold a string
    handle no string answers. The payload field's value is NULL (its int_value keeps the handle), and the place
    names the frame `?`; the handle's number stood in for the function (`736 ← _get_data ← _next_data`), in the
    table and in summary's sentence alike."""
    path = craft(tmp_path / "nameless.sqlite", "DELETE FROM StringIds WHERE value = '_try_get_data'", source=BEFORE)
    ((handle,),) = raw("SELECT id FROM StringIds WHERE value = '_try_get_data'")
    prof = nsysql.load(path, cache=False)
    got = prof.sql(
        f"SELECT DISTINCT value FROM nvtx_payload_fields WHERE field = 'Frames.Function' AND int_value = {handle}"
    )
    assert got.rows() == [(None,)]
    places = prof.cpu(by="python")
    main_place = places.filter(pl.col("role") == "main")["place"][0]
    assert main_place == "? ← _get_data ← _next_data"
