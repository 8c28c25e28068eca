"""A cold command builds the canonical tables its question reads; a later one adds what it needs to the stored
entry (issue 35; nsysql.tuning's `lazy_build`). The answers are those of a load that builds every table."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from conftest import built_cache, craft, fixture
from polars.testing import assert_frame_equal

import nsysql
from nsysql.cli import main
from nsysql.loader import BUILDING
from nsysql.loader.raw import READING

SMALL = fixture("train_small")


@pytest.fixture(autouse=True)
def lazy_for_small_exports(monkeypatch):
    """The lazy build applies from $NSYSQL_LAZY_MIN_MB MiB (unset: every export); these tests see it whatever
    the environment they run in says."""
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "0")


# tables a lazy build leaves out for the questions here (kernels, api), which a whole one holds
WHOLE = {"gpu_ops", "api_calls", "os_calls", "op_launch", "data_quality", "nvtx_ranges", "gpu_busy", "op_range_links"}


def whole_build(export: Path, dest: Path):
    """`export` as a load that builds every table has it: a copy of the entry the run's first load of it left
    (conftest.built_cache, with the default settings: every table at once for an export under 32 MiB), so that
    the whole builds the lazy ones are held to are the run's one cold build of each fixture, not one more each."""
    cdir = built_cache(dest, export)
    assert export.stat().st_size < 32 * 2**20 and WHOLE <= entry_tables(cdir)  # the premise: a whole entry
    return nsysql.load(export, cache_dir=cdir)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """train_small as a load that builds every table has it (whole_build): the answers the lazy entries are held
    to, for the module's tests."""
    p = whole_build(SMALL, tmp_path_factory.mktemp("whole"))
    yield p
    p.close()


@pytest.fixture(scope="module")
def cold_kernels(tmp_path_factory):
    """A cache directory as a cold `kernels` leaves it (the lazy entry, its stored answer), with that load's
    progress lines and answer: built once for the module's tests of that load and of what later loads add to
    its entry, each of which copies the directory (`from_cold_kernels`) rather than build the entry again."""
    cdir = tmp_path_factory.mktemp("cold_kernels") / "cache"
    steps: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NSYSQL_LAZY_MIN_MB", "0")
        with nsysql.load(SMALL, cache_dir=cdir, progress=steps.append) as p:
            kernels = p.kernels()
    return cdir, tuple(steps), kernels


def from_cold_kernels(cold_kernels, tmp_path: Path) -> Path:
    """A copy of the cache directory a cold `kernels` left (cold_kernels), at tmp_path/cache."""
    return Path(shutil.copytree(cold_kernels[0], tmp_path / "cache"))


def assert_same_sections(want: dict, got: dict) -> None:
    """Each section of `got` (summary's) equals `want`'s: frames as frames, other values as values."""
    for k, v in want.items():
        if isinstance(v, pl.DataFrame):
            assert_frame_equal(v, got[k])
        else:
            assert v == got[k], k


def entry_tables(cdir: Path) -> set[str]:
    (entry,) = cdir.glob("*.duckdb")
    con = duckdb.connect(str(entry), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()


@pytest.mark.parametrize("threads", ["2", "4"])
def test_a_cold_kernels_builds_no_iterations_gaps_or_nvtx_nesting(tmp_path, monkeypatch, threads):
    # with 4 threads or more too, where a whole build would be made in memory and copied to disk meanwhile
    # (nsysql.tuning's background_persist): a lazy build is not
    monkeypatch.setenv("NSYSQL_THREADS", threads)
    cdir = tmp_path / "cache"
    res = CliRunner().invoke(main, ["--cache-dir", str(cdir), "kernels", str(SMALL), "-f", "csv"])
    assert res.exit_code == 0, res.output
    built = entry_tables(cdir)
    assert {"gpu_ops", "kernel_classes", "strings", "profile_facts"} <= built
    # what iterations and gaps read (gpu_busy), the NVTX nesting passes (op_ranges' tables) and the process roles;
    # `devices` it builds: a kernel that ran only on GPUs without tensor cores is `no` (45_kernel_classes.sql)
    assert "devices" in built
    assert not built & {"gpu_busy", "op_range_links", "range_chains", "process_roles"}
    # nor the CPU calls, nor which call launched each op, nor the checks of every table's rows (data_quality)
    assert not built & {"api_calls", "os_calls", "op_launch", "data_quality"}
    # nor NVTX ranges, marks or the ranges open per thread: the profile's facts read their extents alone
    assert not built & {"nvtx_ranges", "nvtx_marks", "nvtx_open"}


# every fact but the one a cache entry adds as it is stored (`complete`)
FACTS = "SELECT * FROM profile_facts WHERE key <> 'complete' ORDER BY ALL"


# what a question that does not read them reads of each kind of row: a progress line's start, and the tables
# a whole build has that its entry must not
NOT_READ = {
    "kernels": (("reading NVTX ranges,", "reading OS runtime calls,"), {"nvtx_ranges", "os_calls"}),
    "api": (("reading CUDA kernels,", "reading memory copies,", "reading memsets,"), {"gpu_ops"}),
}


@pytest.mark.parametrize(
    "name,question", [("pytorch_nvtx", "kernels"), ("loader_cpu_before", "kernels"), ("graph_loop", "api")]
)
def test_a_cold_question_reads_no_row_it_does_not_use_and_states_the_same_facts(tmp_path, name, question):
    # the profile's span and frameworks need GPU ops, NVTX ranges, marks and OS runtime calls only as their
    # extents and the `aten::` names of ranges (SQLite's aggregates): a cold `kernels` reads no NVTX event or OS
    # call, a cold `api` no GPU op, and the facts are those of a whole build, which reads every row.
    # pytorch_nvtx names its operator ranges inline (`aten::...`), loader_cpu_before has NVTX marks, graph_loop
    # CUDA graph launches beside kernels and copies.
    path = fixture(name)
    lines, tables = NOT_READ[question]
    steps: list[str] = []
    cdir = tmp_path / "cache"
    with nsysql.load(path, cache_dir=cdir, progress=steps.append) as p:
        getattr(p, question)()
        reading = [line for line in steps if line.startswith("reading ")]
        assert reading and not [line for line in reading if line.startswith(lines)], reading
        assert not entry_tables(cdir) & tables
        facts = p.sql(FACTS)
    with whole_build(path, tmp_path / "whole") as w:
        assert_frame_equal(facts, w.sql(FACTS))
        kinds = w.sql("SELECT count(*) FILTER (WHERE key = 'framework') FROM profile_facts").item()
    assert kinds == 1  # PyTorch found, in both, so the names' count is compared too


def test_a_cold_kernels_builds_what_it_reads_in_the_loads_one_pass(cold_kernels):
    # not the base tables first and its own added after (a second pass, and a new entry renamed over the first)
    _, steps, _ = cold_kernels
    building = [line for line in steps if line.startswith("building ")]
    assert sum(" (step 1 of " in line for line in building) == 1, building
    assert built(steps, "45_kernel_classes") and built(steps, "49_kernel_tensor_use")


@pytest.mark.parametrize("question", ["info", "api", "ranges", "report"])
def test_a_cold_question_is_built_in_one_pass(tmp_path, question):
    # every table the question reads, the tables whose rows say which analyses apply included (info), is planned
    # before the load: one pass over the export, no entry grown after it
    steps: list[str] = []
    with nsysql.load(SMALL, cache_dir=tmp_path / "cache", progress=steps.append) as p:
        getattr(p, question)()
    building = [line for line in steps if line.startswith("building ")]
    assert sum(" (step 1 of " in line for line in building) == 1, building


def test_a_small_export_is_built_whole_unless_told(tmp_path, monkeypatch):
    # below $NSYSQL_LAZY_MIN_MB (32 MiB unset) every table is built at once: train_small is well under it
    assert SMALL.stat().st_size < 32 * 2**20
    monkeypatch.delenv("NSYSQL_LAZY_MIN_MB")
    steps: list[str] = []
    with nsysql.load(SMALL, cache_dir=tmp_path / "cache", progress=steps.append) as p:
        p.kernels()
    assert built(steps, "80_gpu_busy") and built(steps, "60_op_ranges")


def built(progress: list[str], stem: str) -> bool:
    """Whether a load's progress lines say it built the canonical file `stem` (as nsysql.loader.BUILDING names it)."""
    return any(line.startswith(f"building {BUILDING.get(stem, stem)} (") for line in progress)


def test_a_later_question_adds_to_the_entry_without_rebuilding_it(tmp_path, whole, cold_kernels):
    cdir = from_cold_kernels(cold_kernels, tmp_path)  # what a cold kernels left
    _, first, kernels = cold_kernels
    assert built(first, "40_gpu_ops") and not built(first, "60_op_ranges") and not built(first, "80_gpu_busy")
    later: list[str] = []
    with nsysql.load(SMALL, cache_dir=cdir, progress=later.append) as p:
        summary = p.summary()
        ranges = p.kernels_by_range()
    # what the entry lacked is built into it; what it held is not built again
    assert built(later, "60_op_ranges") and built(later, "80_gpu_busy")
    assert not built(later, "40_gpu_ops") and not built(later, "45_kernel_classes")
    assert {"gpu_busy", "op_range_links", "range_chains", "process_roles", "devices"} <= entry_tables(cdir)
    again: list[str] = []
    with nsysql.load(SMALL, cache_dir=cdir, progress=again.append) as p:
        assert p.api().height > 0  # not asked before: from the entry's tables
    assert again == []  # whole now: opened, nothing built

    # the answers of a load that builds every table (floats to their last bits aside: a sum's order follows
    # the order DuckDB stored the rows in)
    assert_frame_equal(whole.kernels(), kernels)
    assert_frame_equal(whole.kernels_by_range(), ranges)
    want = whole.summary()
    assert want.keys() == summary.keys()
    assert_same_sections(want, summary)


def test_user_sql_and_the_connection_see_every_table_of_a_partial_entry(tmp_path, whole, cold_kernels):
    cdir = from_cold_kernels(cold_kernels, tmp_path)  # the partial entry a cold kernels left
    assert "op_range_links" not in entry_tables(cdir)
    with nsysql.load(SMALL, cache_dir=cdir) as p:
        n = p.sql("SELECT count(*) AS n FROM op_range_links")["n"][0]
    assert whole.con.execute("SELECT count(*) FROM op_range_links").fetchall()[0][0] == n


def test_a_cold_summary_builds_what_it_reads_in_one_pass(tmp_path, whole):
    # the engine plans the request before the build runs (Engine.plan_request; store.opening._Question): the
    # canonical files run once, numbered from one step 1 to its last, never a second pass after the first
    steps: list[str] = []
    with nsysql.load(SMALL, cache_dir=tmp_path / "cache", progress=steps.append) as p:
        summary = p.summary()
    building = [line for line in steps if line.startswith("building ")]
    assert sum(" (step 1 of " in line for line in building) == 1, building
    assert len(building) == len(set(building)), building  # no file twice
    # and no more than it reads: the CPU samples' tables are read (the idle facts), the tables of `nsysql cpu`'s
    # Python samples are not, nor the NVTX payloads (`collectives` reads them)
    assert built(steps, "80_gpu_busy") and not built(steps, "68_python_samples")
    assert not built(steps, "55_nvtx_payloads")
    assert_same_sections(whole.summary(), summary)


def test_reports_planned_together_are_built_in_one_pass(tmp_path, whole):
    # what `nsysql stats` does: the reports' tables planned at once (Profile.plan), then asked side by side
    steps: list[str] = []
    names = ("kernels", "ranges", "kernels_by_range", "iterations", "gaps")
    with nsysql.load(SMALL, cache_dir=tmp_path / "cache", progress=steps.append) as p:
        p.plan(*names)
        got = p.parallel(*(lambda q, n=n: getattr(q, n)() for n in names))
    building = [line for line in steps if line.startswith("building ")]
    assert sum(" (step 1 of " in line for line in building) == 1, building
    for n, df in zip(names, got):
        assert_frame_equal(getattr(whole, n)(), df)


def test_a_warm_stats_answers_from_the_store_and_leaves_the_entry_as_it_was(tmp_path):
    """`stats` plans its reports' tables before asking them (Profile.plan); asked again, every answer is stored,
    so the entry is neither opened to plan nor completed: the second run prints the same and writes nothing."""
    import subprocess
    import sys

    cdir = tmp_path / "cache"
    argv = [sys.executable, "-m", "nsysql", "--cache-dir", str(cdir), "stats", "-r", "kernels,iterations,gaps"]
    first = subprocess.run([*argv, str(SMALL)], capture_output=True, text=True, check=True).stdout
    (entry,) = cdir.glob("*.duckdb")
    before = (entry.stat().st_size, entry.stat().st_mtime_ns, entry_tables(cdir))
    second = subprocess.run([*argv, str(SMALL)], capture_output=True, text=True, check=True).stdout
    assert second == first
    assert (entry.stat().st_size, entry.stat().st_mtime_ns, entry_tables(cdir)) == before
    # a lazy entry (what the reports read, no more), not completed by the second run
    assert "gpu_ops" in before[2] and "thread_states" not in before[2]


def test_a_warm_question_adds_only_the_tables_it_reads(tmp_path, whole, cold_kernels):
    # the entry a cold `kernels` left is not completed whole when opened again: `ranges` adds the NVTX nesting's
    # tables, not the iterations' (gpu_busy), the process roles or the CPU's
    cdir = from_cold_kernels(cold_kernels, tmp_path)
    first = entry_tables(cdir)
    steps: list[str] = []
    with nsysql.load(SMALL, cache_dir=cdir, progress=steps.append) as p:
        ranges = p.ranges()
    added = entry_tables(cdir) - first
    assert {"op_range_links", "range_chains"} <= added and not {"op_range_links", "range_chains"} & first
    assert not added & {"gpu_busy", "process_roles", "devices", "thread_states", "cpu_samples"}, added
    assert built(steps, "60_op_ranges") and not built(steps, "80_gpu_busy") and not built(steps, "40_gpu_ops")
    assert_frame_equal(whole.ranges(), ranges)


# A process that asks questions adding tables to its entry, one after another, once told to go.
GROWER = """
import sys
import nsysql
p = nsysql.load(sys.argv[1], cache_dir=sys.argv[2])
p.kernels()
print("ready", flush=True)
sys.stdin.readline()
for question in ("api", "ranges", "gaps"):
    getattr(p, question)()
p.close()
"""


def read_whole(entry: Path) -> set[str] | None:
    """The tables of the entry in place, each read to its last row; None where another process holds it locked."""
    try:
        con = duckdb.connect(str(entry), read_only=True)
    except duckdb.IOException as e:
        if "lock" in str(e).lower():
            return None
        raise
    try:
        assert con.execute("SELECT count(*) FROM profile_facts WHERE key = 'complete'").fetchall() == [(1,)]
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for name in names:
            con.execute(f'SELECT * FROM "{name}"').fetchall()
        return names
    finally:
        con.close()


def test_a_reader_of_an_entry_reads_it_whole_while_another_process_adds_tables(tmp_path):
    # The entry in place is never written: tables are added to a copy renamed over it (store.tables.grow). A
    # reader that holds the old file keeps it byte for byte, and each new reader finds a whole entry.
    import hashlib
    import os
    import subprocess
    import sys

    cdir = tmp_path / "cache"
    env = {**os.environ, "NSYSQL_LAZY_MIN_MB": "0"}
    argv = [sys.executable, "-c", GROWER, str(SMALL), str(cdir)]
    grower = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert grower.stdout.readline() == "ready\n"
        (entry,) = cdir.glob("*.duckdb")
        with open(entry, "rb") as held:
            before = hashlib.sha256(held.read()).hexdigest()
            first = read_whole(entry)
            grower.stdin.write("go\n")
            grower.stdin.flush()
            seen = []
            while grower.poll() is None:
                got = read_whole(entry)
                if got is not None:
                    assert first is None or first <= got
                    seen.append(got)
            held.seek(0)
            assert hashlib.sha256(held.read()).hexdigest() == before  # the file it held was not written
    finally:
        grower.kill() if grower.poll() is None else None
    assert grower.wait() == 0
    assert seen and {"api_calls", "nvtx_ranges", "gpu_busy"} <= read_whole(entry)


def test_a_cold_kernels_reads_no_cuda_api_call_and_a_later_info_counts_their_flaws(tmp_path, monkeypatch):
    # the calls are read to tie each op to its launch (op_launch) and to count their flaws (data_quality): kernels
    # reads neither. A call beyond any clock, a REAL beyond 64 bits and an id two calls share: what a later `info`
    # counts is what a load that builds every table counts
    calls = "CUPTI_ACTIVITY_KIND_RUNTIME"
    p = craft(
        tmp_path / "flawed.sqlite",
        f'UPDATE {calls} SET "end" = {2**63 - 1} WHERE rowid = 1',
        f"UPDATE {calls} SET correlationId = 1e30 WHERE rowid = 2",
        f"UPDATE {calls} SET correlationId = (SELECT correlationId FROM {calls} WHERE rowid = 3) WHERE rowid = 4",
    )
    cdir = tmp_path / "cache"
    steps: list[str] = []
    with nsysql.load(p, cache_dir=cdir, progress=steps.append) as prof:
        prof.kernels()
    assert [s for s in steps if s.startswith("reading ")]  # what it read is told...
    assert not [s for s in steps if s.startswith(f"reading {READING['raw_runtime']}")]  # ...and no call is
    assert not entry_tables(cdir) & {"api_calls", "op_launch", "data_quality"}
    with nsysql.load(p, cache_dir=cdir) as prof:
        later = prof.sql("SELECT * FROM data_quality ORDER BY ALL")
    monkeypatch.setenv("NSYSQL_NO_TUNING", "lazy_build")
    with nsysql.load(p, cache=False) as prof:
        want = prof.sql("SELECT * FROM data_quality ORDER BY ALL")
    assert {"start or end beyond +-2^62 ns", "correlationId beyond 64-bit integers (a REAL)"} <= set(
        want.filter(pl.col("source") == calls)["problem"]
    )
    assert want.filter(pl.col("problem") == "correlationId shared by several calls")["rows"].to_list() == [2]
    assert_frame_equal(want, later)


@pytest.mark.parametrize(
    ("question", "reads_calls"),
    [
        (("summary", {}), True),  # the launch figures, iterations and NVTX attribution read the calls
        (("kernels", {}), False),
        # `per` chooses what is read: the hint for its value (the loop's tables, which read the calls)
        (("kernels", {"by": "category", "per": "iteration"}), True),
        (("kernels", {"by": "category", "per": "range"}), True),  # the ranges open on the launching threads
    ],
)
def test_a_cli_question_is_read_in_the_cold_loads_first_pass(tmp_path, question, reads_calls):
    # the CLI hands its command's question to the load (nsysql._load.opened): what it reads is read with the base
    # tables by the readers that start first, which tell it; a later pass (what a question adds) reads untold
    from nsysql import _load

    steps: list[str] = []
    prof = _load.opened(SMALL, _load.facade, cache_dir=tmp_path, progress=steps.append, question=question)
    with prof:
        getattr(prof, question[0])(**question[1])
    told = {s.split(",")[0] for s in steps if s.startswith("reading ")}
    assert (f"reading {READING['raw_runtime']}" in told) == reads_calls
    assert f"reading {READING['raw_kernel']}" in told


def test_several_cli_questions_are_read_in_the_cold_loads_first_pass(tmp_path):
    # `stats` asks several reports of one load: what each reads is told to the readers that start first
    from nsysql import _load

    steps: list[str] = []
    asked = [("kernels", {}), ("iterations", {})]
    prof = _load.opened(SMALL, _load.facade, cache_dir=tmp_path, progress=steps.append, question=asked)
    with prof:
        prof.each(*asked)
    told = {s.split(",")[0] for s in steps if s.startswith("reading ")}
    assert {f"reading {READING['raw_runtime']}", f"reading {READING['raw_kernel']}"} <= told


@pytest.mark.parametrize("rank", ["ddp_blobs", "ddp_pair"])
def test_a_cold_kernels_counts_payload_bytes_without_reading_them(tmp_path, rank):
    # what the load notes when payload schemas have no event bytes (exported without --include-blobs: ddp_pair)
    # rests on a count in SQLite: a cold `kernels` reads no payload bytes and notes what a whole build notes
    path = fixture(rank).parent / "rank0.sqlite"
    steps: list[str] = []
    with nsysql.load(path, cache_dir=tmp_path / "cache", progress=steps.append) as p:
        p.kernels()
        reading = [line for line in steps if line.startswith("reading NVTX payloads")]
        assert reading and all(line.startswith("reading NVTX payloads counted,") for line in reading), reading
        noted = p.sql("SELECT value FROM profile_facts WHERE key = 'missing' ORDER BY ALL")
    with whole_build(path, tmp_path / "whole") as w:
        assert_frame_equal(noted, w.sql("SELECT value FROM profile_facts WHERE key = 'missing' ORDER BY ALL"))
    assert any("binaryData" in v for v in noted["value"]) == (rank == "ddp_pair")


def test_what_an_entry_holds_is_read_alike_without_listing_its_functions(tmp_path, whole, cold_kernels):
    """A cache entry holds whole canonical files only, so its tables, views and types prove the files that define
    them, and a file of functions alone is proved by a file that includes it or by calling its functions
    (loader.built's `whole_files`): the same files as DuckDB's full function list says, for a lazy entry, a whole
    one, and one that lacks a file of functions alone that nothing includes (device_layers' file)."""
    from nsysql import loader
    from nsysql.queries import canonical_order

    lazy = next(cold_kernels[0].glob("*.duckdb"))
    full = next(Path(whole.cache_entry).parent.glob("*.duckdb"))
    lacking = Path(shutil.copy(full, tmp_path / "lacking.duckdb"))
    con = duckdb.connect(str(lacking))
    con.execute("DROP MACRO TABLE device_layers")
    con.close()
    con = duckdb.connect(str(full), read_only=True)
    defined = "SELECT function_name FROM duckdb_functions() WHERE database_name = current_database()"
    functions = {r[0] for r in con.execute(defined).fetchall()}
    con.close()
    seen = []
    for entry in (lazy, full, lacking):
        con = duckdb.connect(str(entry), read_only=True)
        try:
            seen.append(loader.built(con, whole_files=True))
            assert seen[-1] == loader.built(con), entry.name
        finally:
            con.close()
    files = {f.name for f in canonical_order()}
    assert seen[0] < files and seen[1] == files and seen[2] == files - {"46_device_layers.sql"}
    # a call proves a function is there only where no built-in function has its name
    builtins = {r[0] for r in duckdb.connect().execute("SELECT function_name FROM duckdb_functions()").fetchall()}
    assert "device_layers" in functions and not builtins & functions
