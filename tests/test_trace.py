"""`nsysql trace`: Chrome/Perfetto trace-event JSON. Every event is well-formed, the counts are those of the
canonical tables (asked through Profile.sql), timestamps are the export's ns / 1000, and --iterations/--window
keep only what overlaps the window."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import PUBLIC, fixture, loaded

from nsysql.cli import main

GPU_CATS = {"kernel", "memcpy", "memset", "graph"}


def write_trace(tmp: Path, export: Path, *args: str) -> dict:
    out = tmp / f"{export.stem}{'-'.join(a.strip('-').replace(':', '_') for a in args)}.json"
    r = CliRunner().invoke(main, ["trace", str(export), "-o", str(out), *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_trace(tmp_path_factory.mktemp("trace"), fixture("train_small"))


def count(prof, sql: str) -> int:
    return prof.sql(sql).item()


def check_well_formed(doc: dict) -> list[dict]:
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    open_async = Counter()
    for e in events:
        assert e["ph"] in ("X", "M", "b", "e"), e
        assert isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["ts"], (int, float))
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            assert isinstance(e["cat"], str)
        if e["ph"] in ("b", "e"):
            assert e["cat"] == "nvtx" and isinstance(e["id"], str)
            open_async[e["id"]] += 1 if e["ph"] == "b" else -1
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
    assert not any(open_async.values())  # every begin has its end
    # every track an event is on is named, and so is every process
    named_threads = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name" and e["ph"] == "M"}
    named_procs = {e["pid"] for e in events if e["name"] == "process_name" and e["ph"] == "M"}
    for e in events:
        if e["ph"] != "M":
            assert (e["pid"], e["tid"]) in named_threads and e["pid"] in named_procs, e
    return events


def test_every_event_is_well_formed(small):
    check_well_formed(small)
    assert small["displayTimeUnit"] == "ms"


def test_counts_equal_the_canonical_tables(small):
    prof = loaded(str(fixture("train_small")))
    cats = Counter(e.get("cat") for e in small["traceEvents"] if e["ph"] == "X")
    assert cats["kernel"] == count(prof, "SELECT count(*) FROM gpu_ops WHERE kind = 'kernel'") > 0
    assert sum(cats[c] for c in GPU_CATS) == count(prof, "SELECT count(*) FROM gpu_ops")
    assert cats["cuda_api"] == count(prof, "SELECT count(*) FROM api_calls") > 0
    assert cats["nvtx"] == count(prof, "SELECT count(*) FROM nvtx_ranges") > 0
    assert cats["iteration"] == prof.iterations().height == 20
    assert cats["gap"] == prof.gaps().height > 0


def test_timestamps_are_microseconds(small):
    prof = loaded(str(fixture("train_small")))
    want = sorted(
        (s / 1000, d / 1000, n)
        for s, d, n in prof.sql(
            "SELECT o.start_ns, o.duration_ns, s.value FROM gpu_ops o JOIN strings s ON s.id = o.name_id"
        ).iter_rows()
    )
    got = sorted((e["ts"], e["dur"], e["name"]) for e in small["traceEvents"] if e.get("cat") in GPU_CATS)
    assert got == want
    api = sorted(prof.sql("SELECT start_ns / 1000, (end_ns - start_ns) / 1000 FROM api_calls").iter_rows())
    assert sorted((e["ts"], e["dur"]) for e in small["traceEvents"] if e.get("cat") == "cuda_api") == api


def test_iterations_marked_warmup_and_outliers(small):
    prof = loaded(str(fixture("train_small")))
    its = prof.iterations()
    names = [e["name"] for e in small["traceEvents"] if e.get("cat") == "iteration"]
    assert sum(n.endswith("(warm-up)") for n in names) == its["warmup"].sum() == 1
    assert sum(n.endswith("(outlier)") for n in names) == (its["outlier"] & ~its["warmup"]).sum() == 4
    gaps = [e for e in small["traceEvents"] if e.get("cat") == "gap"]
    assert {e["args"]["cause"] for e in gaps} == set(prof.gaps()["cause"].to_list())
    assert all(e["name"] == f"idle: {e['args']['cause']}" for e in gaps)


def test_iterations_option_limits_the_window(tmp_path):
    export = fixture("train_small")
    doc = write_trace(tmp_path, export, "--iterations", "5:7")
    events = check_well_formed(doc)
    prof = loaded(str(export))
    its = prof.iterations().filter(prof.iterations()["iteration"].is_between(5, 7))
    t0, t1 = its["start_ns"].min(), its["end_ns"].max()
    assert (doc["otherData"]["window_start_ns"], doc["otherData"]["window_end_ns"]) == (t0, t1)
    assert [e["name"] for e in events if e.get("cat") == "iteration"] == ["iteration 5", "iteration 6", "iteration 7"]
    for e in events:
        if e["ph"] == "X":  # everything overlaps the window
            assert e["ts"] <= t1 / 1000 and e["ts"] + e["dur"] >= t0 / 1000 - 1e-6, e
    inside = f"start_ns <= {t1} AND end_ns >= {t0}"
    cats = Counter(e.get("cat") for e in events)
    assert cats["kernel"] == count(prof, f"SELECT count(*) FROM gpu_ops WHERE kind = 'kernel' AND {inside}") > 0
    assert cats["cuda_api"] == count(prof, f"SELECT count(*) FROM api_calls WHERE {inside}")
    assert cats["nvtx"] == count(prof, f"SELECT count(*) FROM nvtx_ranges WHERE {inside}")
    assert cats["kernel"] < count(prof, "SELECT count(*) FROM gpu_ops WHERE kind = 'kernel'")


def test_window_option_counts_from_the_profile_start(tmp_path):
    export = fixture("train_small")
    prof = loaded(str(export))
    start = int(prof.facts["span_start_ns"][0])
    doc = write_trace(tmp_path, export, "--window", "8.3s:8.4s")
    assert (doc["otherData"]["window_start_ns"], doc["otherData"]["window_end_ns"]) == (
        start + 8_300_000_000,
        start + 8_400_000_000,
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--iterations", "50:60"], "no such iterations"),
        (["--iterations", "x"], "--iterations is A:B"),
        (["--window", "2s"], "--window is START:END"),
        (["--window", "3s:1s"], "END must be after START"),
        (["--window", "1s:2s", "--iterations", "1:2"], "not both"),
    ],
)
def test_bad_window_is_one_line(tmp_path, args, words):
    r = CliRunner().invoke(main, ["trace", str(fixture("train_small")), "-o", str(tmp_path / "t.json"), *args])
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and words in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "t.json").exists()


def test_nvtx_domains_get_their_own_tracks(tmp_path):
    export = fixture("ddp_pair").parent / "rank0.sqlite"
    doc = write_trace(tmp_path, export)
    events = check_well_formed(doc)
    prof = loaded(str(export))
    domains = set(prof.sql("SELECT DISTINCT domain FROM nvtx_ranges WHERE domain <> ''")["domain"].to_list())
    assert domains
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    for d in domains:
        assert any(n.endswith(f": NVTX {d}") for n in names), (d, names)
    nvtx = [e for e in events if e.get("cat") == "nvtx"]
    assert Counter(e["args"]["domain"] for e in nvtx) == Counter(
        dict(prof.sql("SELECT domain, count(*) FROM nvtx_ranges GROUP BY 1").iter_rows())
    )


def test_start_end_ranges_are_async_pairs(tmp_path):
    export = PUBLIC / "YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite"
    if not export.exists():
        pytest.skip(f"{export} not present")
    events = check_well_formed(write_trace(tmp_path, export))
    prof = loaded(str(export))
    begins = [e for e in events if e["ph"] == "b"]
    assert len(begins) == count(prof, "SELECT count(*) FROM nvtx_ranges WHERE style = 'StartEnd'") > 0
    pushpop = [e for e in events if e["ph"] == "X" and e["cat"] == "nvtx"]
    assert len(pushpop) == count(prof, "SELECT count(*) FROM nvtx_ranges WHERE style = 'PushPop'")
    assert not [e for e in events if e.get("cat") in GPU_CATS]  # an export without GPU data
