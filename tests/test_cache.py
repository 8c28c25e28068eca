"""The cache: reused, keyed on the input, atomic, self-healing, and never a reason to fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import built_cache, fixture
from polars.testing import assert_frame_equal

import nsysql
from nsysql.cli import main
from nsysql.store import opening as _load
from nsysql.store import tables as cache


@pytest.fixture(params=["in the file", "in memory, copied in the background"])
def build_mode(request, monkeypatch):
    """Both ways a cold load builds its entry: nsysql.store.opening copies an entry built in memory in the background
    with 4 or more DuckDB threads and memory to spare, so NSYSQL_THREADS picks the way on any machine (8 threads
    on a 2-core machine are within the 4 per CPU that NSYSQL_THREADS allows)."""
    background = request.param != "in the file"
    monkeypatch.setenv("NSYSQL_THREADS", "8" if background else "2")
    monkeypatch.delenv("NSYSQL_MEMORY_LIMIT", raising=False)
    return background


@pytest.fixture(scope="module")
def reference():
    """train_small loaded without a cache: the answers every cached load here is held to, built once for the
    module's tests (it only answers; the cold builds under test are each test's own)."""
    p = nsysql.load(fixture("train_small"), cache=False)
    yield p
    p.close()


def copy(tmp_path, name="train_small"):
    dst = tmp_path / "in" / f"{name}.sqlite"
    dst.parent.mkdir(exist_ok=True)
    shutil.copy2(fixture(name), dst)
    return dst


def test_second_load_reads_the_cache_and_agrees(tmp_path, build_mode, reference):
    src, cdir = copy(tmp_path), tmp_path / "c"
    first = nsysql.load(src, cache_dir=cdir)
    cache.wait()  # written in the background while `first` answers from memory
    assert first.cache_entry is not None and first.cache_entry.exists()
    mtime = first.cache_entry.stat().st_mtime_ns
    second = nsysql.load(src, cache_dir=cdir)
    assert second.cache_entry == first.cache_entry and first.cache_entry.stat().st_mtime_ns == mtime
    fresh = reference
    assert fresh.cache_entry is None
    for method in ("kernels", "ranges", "kernels_by_range", "iterations"):
        assert_frame_equal(getattr(second, method)(), getattr(fresh, method)(), rel_tol=1e-9)
    assert_frame_equal(second.gaps(), fresh.gaps())


def test_changed_input_gets_a_new_entry(tmp_path):
    src, cdir = copy(tmp_path), tmp_path / "c"
    a = nsysql.load(src, cache_dir=cdir).cache_entry
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 1_000_000_000))
    b = nsysql.load(src, cache_dir=cdir).cache_entry
    assert a != b
    other = copy(tmp_path, "loop_after")
    assert nsysql.load(other, cache_dir=cdir).cache_entry not in (a, b)


def test_corrupt_or_half_written_entries_are_rebuilt(tmp_path, build_mode, reference):
    src, cdir = copy(tmp_path), tmp_path / "c"
    want = reference.kernels()
    entry = cache.entry(cdir, src)
    cdir.mkdir()
    entry.write_bytes(b"garbage, not a database" * 100)
    assert_frame_equal(nsysql.load(src, cache_dir=cdir).kernels(), want, rel_tol=1e-9)
    cache.wait()
    # a DuckDB file without the `complete` fact (a build that died before its end)
    entry.unlink()
    con = duckdb.connect(str(entry))
    con.execute("CREATE TABLE profile_facts(key VARCHAR, value VARCHAR)")
    con.close()
    prof = nsysql.load(src, cache_dir=cdir)
    assert_frame_equal(prof.kernels(), want, rel_tol=1e-9)  # (the answer stored above: no need to open it)
    assert prof.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0] > 0  # opening it finds it incomplete: rebuilt
    cache.wait()
    rebuilt = cache.open_entry(entry, {})
    assert rebuilt.execute("SELECT value FROM profile_facts WHERE key = 'complete'").fetchall() == [("yes",)]


def test_unwritable_cache_dir_warns_once_and_works(tmp_path, build_mode):
    src = copy(tmp_path)
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    res = CliRunner().invoke(main, ["--cache-dir", str(blocker / "sub"), "kernels", str(src), "--top", "1"])
    assert res.exit_code == 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysql: warning: cache disabled")
    assert "total_us" in res.stdout  # the kernels table, in the unit it picked


def test_two_processes_on_one_file_both_succeed(tmp_path):
    src, cdir = copy(tmp_path), tmp_path / "c"
    env = {**os.environ, "NSYSQL_CACHE_DIR": str(cdir)}
    cmd = [sys.executable, "-m", "nsysql", "kernels", str(src), "-f", "csv"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    frames = [pl.read_csv(o[0]) for o in outs]
    for f in frames[1:]:
        assert_frame_equal(f, frames[0], rel_tol=1e-6)
    assert len(cache.entries(cdir)) == 1
    assert not list(cdir.glob(".*.tmp"))


def test_entry_being_written_while_others_read(tmp_path, build_mode):
    """While a cold load's entry is being written (held open by its builder, or copied in the background) another
    process succeeds, with or without the entry, and once written the entry is whole and the only one."""
    src, cdir = copy(tmp_path), tmp_path / "c"
    held = nsysql.load(src, cache_dir=cdir)  # cold: the entry still held open, or on its way
    env = {**os.environ, "NSYSQL_CACHE_DIR": str(cdir)}
    out = subprocess.run(
        [sys.executable, "-m", "nsysql", "kernels", str(src), "-f", "csv"], env=env, capture_output=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got, mine = pl.read_csv(out.stdout), held.kernels()
    assert got["name"].to_list() == mine["name"].to_list() and got["total_ns"].to_list() == mine["total_ns"].to_list()
    cache.wait()
    (entry,) = cache.entries(cdir)
    assert not list(cdir.glob(".*.tmp*"))  # no temporary file left behind
    held.close()
    warm = nsysql.load(src, cache_dir=cdir)
    assert warm.cache_entry == entry and cache.open_entry(entry, {}) is not None
    assert_frame_equal(warm.kernels(), mine)


def test_closing_a_cold_profile_waits_for_its_entry(tmp_path, build_mode):
    src, cdir = copy(tmp_path), tmp_path / "c"
    nsysql.load(src, cache_dir=cdir).close()
    assert len(cache.entries(cdir)) == 1


def test_no_cache_flag_and_cache_commands(tmp_path):
    src, cdir = copy(tmp_path), tmp_path / "c"
    r = CliRunner()
    assert r.invoke(main, ["--cache-dir", str(cdir), "--no-cache", "info", str(src)]).exit_code == 0
    assert cache.entries(cdir) == []
    assert r.invoke(main, ["--cache-dir", str(cdir), "info", str(src)]).exit_code == 0
    info = r.invoke(main, ["--cache-dir", str(cdir), "cache", "info", "-f", "csv"])
    rows = pl.read_csv(info.stdout.encode())
    assert rows.height == 1 and rows["source_path"][0] == str(src.resolve())
    assert r.invoke(main, ["--cache-dir", str(cdir), "kernels", str(src)]).exit_code == 0  # stores an answer
    assert list(cdir.glob("*.results"))
    cleared = r.invoke(main, ["--cache-dir", str(cdir), "cache", "clear"])
    assert "removed 1" in cleared.stdout and cache.entries(cdir) == []
    assert not list(cdir.glob("*.results"))


def test_answers_are_stored_and_served_again(tmp_path, build_mode):
    from nsysql.store import answers as memo

    src, cdir = copy(tmp_path), tmp_path / "c"
    first = nsysql.load(src, cache_dir=cdir)
    a = first.iterations()
    stored = list(cdir.glob("*.results/iterations-*/index.json"))
    assert len(stored) == 1
    again = nsysql.load(src, cache_dir=cdir)
    assert memo.get(again.cache_entry, "iterations", {"range": None, "skip": None, "outlier_sigmas": 3.0}) is not None
    assert_frame_equal(again.iterations(), a)
    assert_frame_equal(again.gaps(by="cause"), first.gaps(by="cause"))
    s1, s2 = first.summary(), again.summary()
    assert list(s1) == list(s2) and all(s1[k].equals(s2[k]) for k in s1)
    # a damaged stored answer is recomputed, not served
    for f in stored[0].parent.glob("*.parquet"):
        f.write_bytes(b"not parquet")
    assert_frame_equal(nsysql.load(src, cache_dir=cdir).iterations(), a)
    # other arguments are other answers
    assert nsysql.load(src, cache_dir=cdir).iterations(skip=3)["warmup"].sum() == 3


def test_gaps_after_summary_are_served_without_opening_the_tables(tmp_path, build_mode, reference):
    """The CLI asks gaps(min_ns="1ms"), summary asks gaps(min_ns=1_000_000): one question, one stored answer.
    Idle time by cause is made from the stored gaps and iterations. Neither warm call opens the entry's tables
    (once, a warm `nsysql gaps` recomputed them: 0.5 s at 500k kernels, 2.4 s at 10M)."""
    src, cdir, ref = copy(tmp_path), tmp_path / "c", reference
    nsysql.load(src, cache_dir=cdir).summary()
    cache.wait()
    warm = nsysql.load(src, cache_dir=cdir)
    assert_frame_equal(warm.gaps(min_ns="1ms"), ref.gaps())
    assert_frame_equal(warm.gaps(min_ns="1000us", by="cause"), ref.gaps(by="cause"))
    assert warm._con is None  # answered from the stored frames alone
    # a question the summary did not ask is still computed from the tables, and agrees
    assert_frame_equal(warm.gaps(min_ns="2ms", by="cause"), ref.gaps(min_ns=2_000_000, by="cause"))
    assert warm._con is not None
    assert_frame_equal(warm.gaps(by="cause", include_warmup=True), ref.gaps(by="cause", include_warmup=True))


def test_any_top_of_kernels_is_served_from_the_one_stored_table(tmp_path):
    """summary stores kernels(top=10); `nsysql kernels` asks top=None, others --top N: all are heads of one
    stored table, equal to the SQL's own LIMIT, and a warm Profile answers them without opening the tables."""
    from nsysql.analyses import kernels as _kernels

    src, cdir = copy(tmp_path, "big_step"), tmp_path / "c"
    # the SQL's own LIMIT on the tables of the run's entry of big_step (conftest.built_cache): no build of its own
    ref = nsysql.load(fixture("big_step"), cache_dir=built_cache(tmp_path / "ref", fixture("big_step")))
    nsysql.load(src, cache_dir=cdir).summary()
    cache.wait()
    warm = nsysql.load(src, cache_dir=cdir)
    full = warm.kernels()
    assert full.height > 10
    for top in (3, 10, full.height + 5):
        assert_frame_equal(warm.kernels(top=top), _kernels.kernels(ref.con, top=top))
    assert_frame_equal(full, _kernels.kernels(ref.con))
    assert warm._con is None
    for top in (0, -1):  # no rows is no answer to "the first N" (as `--top 0` is refused)
        with pytest.raises(nsysql.NsysqlError):
            warm.kernels(top=top)


def test_answers_are_kept_per_profile_without_a_cache_too(tmp_path):
    p = nsysql.load(fixture("train_small"), cache=False)
    a = p.iterations()
    a.insert_column(0, pl.Series("mine", [0] * a.height))  # the caller's frame is the caller's own
    b = p.iterations()
    assert "mine" not in b.columns and b.height == a.height
    # kept in memory: the tables under it can go, the answer stays
    p.con.execute("DELETE FROM gpu_ops")
    assert_frame_equal(p.iterations(), b)
    s = p.summary()
    s.pop("kernels")
    assert "kernels" in p.summary()


def test_any_file_name_loads_with_the_cache(tmp_path, build_mode, reference):
    """Quotes, spaces and non-ASCII in the export's name: DuckDB names the entry's database after its file,
    and a quote there once broke the load."""
    ref = reference.kernels()
    for name in ('o\'brien "run" 1', "été"):
        src = tmp_path / "in" / f"{name}.sqlite"
        src.parent.mkdir(exist_ok=True)
        shutil.copy2(fixture("train_small"), src)
        cdir = tmp_path / "c"
        assert_frame_equal(nsysql.load(src, cache_dir=cdir).kernels(), ref)  # cold: builds the entry
        again = nsysql.load(src, cache_dir=cdir)
        assert again.cache_entry.exists()
        assert again.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0] > 0  # warm: opens the entry
        assert_frame_equal(again.parallel(lambda w: w.kernels())[0], ref)


def test_workers_share_answers_and_compute_each_once(tmp_path, monkeypatch, build_mode, reference):
    """Profile.parallel asks on worker Profiles (own cursors, warm or cold): the answers equal one thread's,
    and a question several workers ask at once (iterations, under gaps and stats) is computed once."""
    from nsysql.analyses import iterations as _iter

    src, cdir = copy(tmp_path), tmp_path / "c"
    one = reference
    serial = [one.iterations(), one.gaps(), one.kernels(), one.ranges()]
    calls = []
    real = _iter.iterations
    monkeypatch.setattr(_iter, "iterations", lambda *a, **k: calls.append(1) or real(*a, **k))
    for computed, p in ((1, nsysql.load(src, cache_dir=cdir)), (0, nsysql.load(src, cache_dir=cdir))):  # cold, warm
        calls.clear()
        got = p.parallel(lambda w: w.iterations(), lambda w: w.gaps(), lambda w: w.kernels(), lambda w: w.ranges())
        for a, b in zip(got, serial):
            assert_frame_equal(a, b)
        assert len(calls) == computed  # once cold, though two workers ask; never warm (stored answers)
        s = p.summary()
        assert s["kernels"].height > 0 and s["ranges"].height > 0


def test_background_copy_only_with_cores_and_memory_to_spare():
    from nsysql.loader import open_source

    src = open_source(fixture("train_small"))
    size = src.path.stat().st_size
    assert _load._bytes("2048MB") == 2 * 2**30 and _load._bytes("1.5GB") == int(1.5 * 2**30)
    assert not _load._in_memory_first(src, {"threads": 2, "memory_limit": "8GB"})
    assert _load._in_memory_first(src, {"threads": 8, "memory_limit": "8GB"})
    assert not _load._in_memory_first(src, {"threads": 8, "memory_limit": f"{size * 5}B"})


def test_default_memory_budget_per_thread_with_a_floor_and_a_quarter_of_ram_cap():
    """The process's budget: 2 GB, or 256 MB per DuckDB thread where that is more, at most a quarter of RAM,
    never below 512 MB; DuckDB gets the budget less what the Python side holds (at least half of it), and takes
    the value as written."""
    from nsysql.store.settings import duckdb_share

    limit = _load.default_memory_limit
    assert limit(2, ram_mb=24_000) == "2048MB"  # the 2-core, 24 GB machine
    assert limit(2, ram_mb=4_096) == "1024MB"  # a quarter of a 4 GB laptop
    assert limit(16, ram_mb=128_000) == "4096MB"  # 256 MB x 16 threads
    assert limit(64, ram_mb=32_000) == "8000MB"  # capped at a quarter of RAM
    assert limit(2, ram_mb=1_024) == "512MB"
    con = duckdb.connect(config={"memory_limit": duckdb_share(limit(2, ram_mb=24_000))})
    got = _load._bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
    assert abs(got - 1536 * 2**20) <= 0.1 * 2**30  # three quarters, "1.5 GiB": DuckDB shows tenths of a GiB
    assert duckdb_share("512MB") == f"{256 * 2**20}B"  # half of a small budget
    assert duckdb_share("80%") == "80%" and duckdb_share("none") == "none"  # DuckDB's own ways, as they are


def test_a_script_that_exits_right_after_load_still_gets_its_entry(tmp_path):
    """The background copy may still be running when the interpreter shuts down; the entry must still land,
    with nothing on stderr (a ThreadPoolExecutor refuses new work at shutdown: that lost the entry, with a
    traceback, before it was fixed). NSYSQL_THREADS=8 makes this 2-core machine take the background copy; the
    copy starts 0.3 s late, as on a slow disk, so that the interpreter is surely shutting down when it runs."""
    src, cdir = copy(tmp_path), tmp_path / "c"
    code = (
        "import time, nsysql\n"
        "from nsysql.store import tables as cache\n"
        "persist = cache._persist\n"
        "cache._persist = lambda *a: (time.sleep(0.3), persist(*a))\n"
        f"nsysql.load({str(src)!r}, cache_dir={str(cdir)!r})\n"
    )
    env = dict(os.environ, NSYSQL_THREADS="8")
    env.pop("NSYSQL_NO_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and proc.stderr == ""
    entries = cache.entries(cdir)
    assert len(entries) == 1 and cache.describe(entries[0])["complete"]
    assert not [p for p in cdir.iterdir() if p.name.endswith(".tmp")]


def test_a_script_using_nsysql_exits_silently(tmp_path):
    """Nothing on stderr when a script that asked questions ends: polars reads DuckDB's Arrow stream through a
    capsule, never the DuckDB relation (probing a relation for a missing attribute leaks a reference in DuckDB
    2.0, and nanobind then prints ~40 lines of "leaked instances" at exit)."""
    code = (
        f"import nsysql\np = nsysql.load({str(fixture('train_small'))!r}, cache=False)\n"
        "assert p.kernels().height and p.iterations().height and p.gaps().height\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""
