"""The memory budget: rows too many for DuckDB's share of it are staged in a compressed file of the spill
directory, removed once the load is done, with the same answers (nsysql/loader/raw.py, nsysql/store/settings.py)."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import built_cache, craft, fixture, raw

from nsysql import duck
from nsysql.loader import open_source
from nsysql.loader import raw as staging


def _staging_path(con) -> str:
    return con.execute(
        "SELECT coalesce(max(path), '') FROM duckdb_databases() WHERE database_name = ?", [staging.STAGE]
    ).fetchall()[0][0]


def test_rows_beyond_a_third_of_duckdbs_memory_are_staged_in_a_file_removed_when_unstaged():
    src = open_source(fixture("big_step"))
    kernels, calls = raw(
        src.path,
        "SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL), (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
    )[0]
    # big_step's rows take more than 1 MiB as DuckDB holds them in memory: more than a third of 3 MB (at 2 MB,
    # a block of the staging itself could fail to fit beside them now and then)
    con = duck.connect(config={"memory_limit": "3MB", "threads": 1})
    staging.stage(src, con)
    path = _staging_path(con)
    assert (
        path
        and Path(path).parent == Path(duck.spill_dir())
        and Path(path).name.startswith(f"{staging.STAGE_FILE_PREFIX}{os.getpid()}_")
    )
    got = con.execute(
        f"SELECT (SELECT count(*) FROM {staging.STAGE}.raw_kernel), (SELECT count(*) FROM {staging.STAGE}.raw_runtime)"
    ).fetchall()[0]
    assert got == (kernels, calls)
    staging.unstage(con)
    assert not Path(path).exists() and not Path(path + ".wal").exists()
    con.close()
    # with room in memory, in memory
    con = duck.connect(config={"memory_limit": "1GB"})
    staging.stage(src, con)
    assert _staging_path(con) == ""
    con.close()


def test_a_small_budget_gives_the_same_rows_and_leaves_no_staging_file(tmp_path):
    """600k OS calls (big_step's, repeated) take about 30 MiB staged in memory: more than a third of DuckDB's
    share of a 128 MB budget (half of it), so they are staged on disk; the canonical tables hold every row."""
    path = craft(
        tmp_path / "many_os_calls.sqlite",
        "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 225) "
        'INSERT INTO OSRT_API SELECT start, "end", eventClass, globalTid, nameId, returnValue, nestingLevel, '
        "callchainId FROM OSRT_API, k",
        source="big_step",
    )
    want = raw(
        path,
        "SELECT (SELECT count(*) FROM OSRT_API), (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) + "
        "(SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET), "
        "(SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
    )[0]
    assert want[0] > 500_000
    spill = tmp_path / "tmp"
    spill.mkdir()
    env = dict(os.environ, TMPDIR=str(spill), NSYSQL_MEMORY_LIMIT="128MB")
    query = "SELECT (SELECT count(*) FROM os_calls), (SELECT count(*) FROM gpu_ops), (SELECT count(*) FROM api_calls)"
    p = subprocess.run(
        [sys.executable, "-m", "nsysql", "--no-cache", "sql", str(path), query, "-f", "csv"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert tuple(int(x) for x in p.stdout.strip().splitlines()[-1].split(",")) == want
    assert [f.name for d in spill.glob("nsysql-spill-*") for f in d.iterdir()] == []


def test_duckdb_gets_the_budget_less_a_quarter_for_the_python_side(tmp_path):
    """DuckDB fills its share at 10M kernels, and the process holds up to a sixth of that share beside it: of a
    budget, DuckDB gets three quarters (2 GB: 1.5 GB, not 1.7), or the budget less 320 MB where a quarter is
    less, and at least half of it (nsysql/store/settings.py). Read from the connection a command runs on."""
    import duckdb
    from click.testing import CliRunner

    from nsysql.cli import main

    want_mib = {"4GB": 3072, "2GB": 1536, "1GB": 704, "512MB": 256}
    # the entry a first load builds (conftest.built_cache): a warm open gives DuckDB the same settings as a cold
    # build does (store.opening's one `settings`), without building the export's tables four times
    cache = built_cache(tmp_path / "cache", fixture("train_small"))
    for budget, mib in want_mib.items():
        shown = duckdb.connect(config={"memory_limit": f"{mib}MiB"}).execute("SELECT current_setting('memory_limit')")
        got = CliRunner().invoke(
            main,
            [
                "--cache-dir",
                str(cache),
                "sql",
                str(fixture("train_small")),
                "SELECT current_setting('memory_limit') AS m",
                "-f",
                "csv",
            ],
            env={"NSYSQL_MEMORY_LIMIT": budget},
            catch_exceptions=False,
        )
        assert got.exit_code == 0, got.output
        assert got.output.strip().splitlines()[-1] == shown.fetchall()[0][0], budget


def test_an_export_whose_tables_fit_in_one_row_group_is_read_by_one_duckdb_thread(tmp_path):
    """DuckDB splits a scan among its threads by row group (122,880 rows): where every table a build reads fits in
    one, the connection runs one thread; one table a row longer, and it runs DuckDB's default (one per CPU). A
    thread count that is set (NSYSQL_THREADS) is kept either way."""
    import duckdb
    from click.testing import CliRunner

    from nsysql.cli import main

    def threads(export, cache, **env) -> int:
        got = CliRunner().invoke(
            main,
            ["--cache-dir", str(cache), "sql", str(export), "SELECT current_setting('threads') AS t", "-f", "csv"],
            env={"NSYSQL_THREADS": None, **env},
            catch_exceptions=False,
        )
        assert got.exit_code == 0, got.output
        return int(got.output.strip().splitlines()[-1])

    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchall()[0][0]
    small = fixture("train_small")
    assert max(r[0] for r in raw(small, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")) <= 122_880
    cache = built_cache(tmp_path / "cache", small)
    assert threads(small, cache) == 1
    assert threads(small, cache, NSYSQL_THREADS="3") == 3
    # 122,881 more strings: StringIds, which every build reads, is now longer than one row group
    longer = craft(
        tmp_path / "longer.sqlite",
        "INSERT INTO StringIds(id, value) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < 122881) SELECT 10000000 + i, 'string ' || i FROM n",
    )
    assert threads(longer, tmp_path / "cache2") == default
