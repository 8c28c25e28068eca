"""`nsysql sql` / Profile.sql run where they can neither write nor reach anything (issue 26, item 1).

Every test works on a copy of the train_small fixture, and asserts that the copy (and the fixture itself) keep
their sha256 and mtime. The refusals come from DuckDB's parser (statement types, and what an EXPLAIN explains);
the sandbox's own settings are checked separately, through queries the parser lets through."""

from __future__ import annotations

import hashlib
import os
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixture

import nsysql
from nsysql.cli import main
from nsysql.errors import NsysqlError

TRAIN = fixture("train_small")


def stamp(p):
    return hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns


def run(args, env):
    return CliRunner(env=env).invoke(main, args, catch_exceptions=False)


def kernels_in(export) -> int:
    con = sqlite3.connect(f"file:{export}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def victim(tmp_path_factory):
    d = tmp_path_factory.mktemp("sandbox")
    copy = d / "victim.sqlite"
    copy.write_bytes(TRAIN.read_bytes())
    train = stamp(TRAIN)
    before = stamp(copy)
    yield copy
    assert stamp(copy) == before
    assert stamp(TRAIN) == train


def refused_one_line(res, path):
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith(f"nsysql: error: {path}: "), lines[0]


WRITES = [
    # the issue's reproductions: a write hidden in EXPLAIN ANALYZE
    "EXPLAIN ANALYZE COPY (SELECT 'gone' AS x) TO '{victim}' (FORMAT csv)",
    "EXPLAIN ANALYZE DELETE FROM gpu_ops; EXPLAIN ANALYZE CHECKPOINT",
    "EXPLAIN (FORMAT json) DELETE FROM gpu_ops",
    "EXPLAIN /* ANALYZE SELECT */ ANALYZE INSERT INTO gpu_ops SELECT * FROM gpu_ops",
    "COPY (SELECT 'gone' AS x) TO '{victim}' (FORMAT csv)",
    "COPY gpu_ops FROM '{victim}'",
    "ATTACH '{victim}' AS x (TYPE sqlite)",
    "ATTACH ':memory:' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET threads = 1",
    "SET enable_external_access = true",
    "PRAGMA threads = 1",
    "RESET lock_configuration",
    "CREATE TABLE mine AS SELECT 1",
    "CREATE TEMP TABLE mine AS SELECT 1",
    "INSERT INTO gpu_ops SELECT * FROM gpu_ops",
    "UPDATE gpu_ops SET duration_ns = 0",
    "DELETE FROM gpu_ops",
    "DROP TABLE gpu_ops",
    "CHECKPOINT",
    "USE memory",
    "CALL pragma_version()",
    "SELECT 1; DROP TABLE gpu_ops",
]


@pytest.mark.parametrize("flags", [[], ["--no-cache"]])
def test_cli_refuses_the_issues_writes_on_a_cold_cache(victim, tmp_path, flags):
    """`nsysql sql` on a cold cache (the entry is being built by this very command) and without one: the writes
    hidden in EXPLAIN ANALYZE are refused in one line before anything runs; the export keeps its bytes and
    mtime (the module fixture), and the next commands still see every kernel of the export."""
    for i, q in enumerate(WRITES[:2]):
        env = {"NSYSQL_CACHE_DIR": str(tmp_path / f"cache{i}")}
        res = run([*flags, "sql", str(victim), q.format(victim=victim)], env)
        refused_one_line(res, victim)
        assert "only read" in res.stderr, res.stderr
        for _ in ["warm", "warm again"] if not flags else ["again"]:
            res = run(
                [*flags, "sql", str(victim), "SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'", "-f", "csv"],
                env,
            )
            assert res.exit_code == 0 and res.stdout.splitlines() == ["n", str(kernels_in(victim))], res.output
    assert sorted(os.listdir(victim.parent)) == ["victim.sqlite"]  # nothing written beside it either


READS_THAT_REACH = [
    "SELECT * FROM 'https://example.invalid/x.parquet'",
    "FROM read_parquet('https://example.invalid/x.parquet')",
    "SELECT * FROM read_csv('{victim}')",
    "SELECT * FROM read_text('{victim}')",
    "SELECT * FROM sqlite_scan('{victim}', 'StringIds')",
    "SELECT * FROM glob('{victim_dir}/*')",
    "SELECT * FROM read_blob('{victim}')",
    "SELECT * FROM query('DELETE FROM gpu_ops')",  # a SELECT that runs SQL text: DuckDB takes only a SELECT
]


@pytest.fixture(scope="module", params=["cold-cache", "no-cache", "warm-cache", "background-copy"])
def prof(request, victim, tmp_path_factory):
    """Profile.sql on each way a Profile holds its tables: the read-write connection that just built the cache
    entry (cold), tables in memory (no cache), the entry opened again (warm), and tables in memory while a
    background thread copies them to the entry (4 threads)."""
    cache_dir = tmp_path_factory.mktemp("cache")
    kind = request.param
    if kind == "warm-cache":
        nsysql.load(victim, cache_dir=cache_dir).close()
    p = nsysql.load(
        victim, cache=kind != "no-cache", cache_dir=cache_dir, threads=4 if kind == "background-copy" else None
    )
    yield p
    p.close()


def test_profile_sql_settings_cannot_reach_or_change_anything(prof):
    """The sandbox's settings, read through the sandbox itself: true by construction of nsysql.sandbox."""
    row = prof.sql(
        "SELECT current_setting('enable_external_access') AS ext, "
        "current_setting('lock_configuration') AS locked, "
        "current_setting('autoinstall_known_extensions') AS install, "
        "current_setting('autoload_known_extensions') AS autoload, "
        "current_setting('allow_community_extensions') AS community, "
        "current_setting('python_enable_replacements') AS python_vars"
    ).row(0, named=True)
    assert row == {
        "ext": False,
        "locked": True,
        "install": False,
        "autoload": False,
        "community": False,
        "python_vars": False,
    }


def test_profile_sql_reads_that_reach_outside_fail(prof, victim):
    for q in READS_THAT_REACH:
        with pytest.raises(NsysqlError) as e:
            prof.sql(q.format(victim=victim, victim_dir=victim.parent))
        assert str(e.value).startswith(f"{victim}: ") and "\n" not in str(e.value)
    my_frame = prof.kernels()  # noqa: F841 - a Python variable a replacement scan would find
    with pytest.raises(NsysqlError, match="my_frame"):
        prof.sql("SELECT * FROM my_frame")


def test_profile_sql_refuses_writes_and_keeps_every_kernel(prof, victim):
    for q in WRITES:
        with pytest.raises(NsysqlError, match="only read"):
            prof.sql(q.format(victim=victim))
    n = kernels_in(victim)
    assert prof.sql("SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'")["n"][0] == n
    assert prof.con.execute("SELECT count(*) FROM gpu_ops WHERE kind = 'kernel'").fetchall()[0][0] == n
    assert prof.kernels()["count"].sum() == n


@pytest.mark.parametrize(
    "q",
    [
        "SELECT count(*) FROM gpu_ops",
        "FROM gpu_ops_named LIMIT 1",
        "EXPLAIN SELECT count(*) FROM gpu_ops",
        "EXPLAIN ANALYZE SELECT count(*) FROM gpu_ops",
        "EXPLAIN (FORMAT json) SELECT count(*) FROM gpu_ops",
        "EXPLAIN (SELECT 1)",
        "DESCRIBE gpu_ops",
        "SUMMARIZE devices",
        "WITH k AS (SELECT * FROM gpu_ops WHERE kind = 'kernel') SELECT count(*) FROM k, k AS k2 WHERE k.op_id = k2.op_id",
    ],
)
def test_profile_sql_reads_are_answered(prof, q):
    assert prof.sql(q).height >= 1


def test_profile_sql_sees_the_canonical_tables_and_threads_share_it(prof):
    """The same tables as the profile's own connection; several threads at once get the same answers."""
    own = {
        r[0]
        for r in prof.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "UNION SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal"
        ).fetchall()
    }
    assert "gpu_ops" in own and "gpu_ops_named" in own
    for t in sorted(own):
        assert (
            prof.sql(f'SELECT count(*) AS n FROM "{t}"')["n"][0]
            == prof.con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0]
        ), t
    q = "SELECT kind, count(*) AS n, sum(duration_ns) AS t FROM gpu_ops GROUP BY ALL ORDER BY kind"
    want = prof.con.execute(q).fetchall()
    got = prof.parallel(*[lambda w: w.sql(q).rows() for _ in range(4)])
    assert got == [want] * 4


def test_profile_sql_calls_the_shared_macros(prof, victim):
    """The rules of queries/v1/canonical/00_macros.sql, in user SQL on each way the tables are held; their
    answers are true by construction of each macro's documented rule, and every memcpy's name agrees with its
    copy_kind (the one list of directions) for every memcpy the export holds."""
    row = prof.sql(
        "SELECT family_name('Batch_12') AS fam, family_number('Batch_12') AS num, "
        "family_label('Batch#3') AS label, family_label('Forward') AS plain, "
        "in_family('Batch_12', 'Batch') AS member, in_family('Batch_12', 'Bat') AS not_member, "
        "in_family('Batch', 'Batch') AS itself"
    ).row(0, named=True)
    assert row == {
        "fam": "Batch",
        "num": 12,
        "label": "Batch*",
        "plain": "Forward",
        "member": True,
        "not_member": False,
        "itself": False,
    }
    con = sqlite3.connect(f"file:{victim}?mode=ro&immutable=1", uri=True)
    try:
        memcpys = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
    finally:
        con.close()
    named = prof.sql(
        "SELECT count(*) AS n FROM gpu_ops o JOIN strings s ON s.id = o.name_id "
        "JOIN copy_kinds() k ON k.label = o.copy_kind::VARCHAR "
        "WHERE o.kind = 'memcpy' AND s.value = '[CUDA memcpy ' || k.label || ']'"
    )["n"][0]
    assert memcpys > 0 and named == memcpys
