"""A canonical file whose `@empty_without` inputs are empty is not run: its tables are created empty, of the
shapes a run gives them (nsysql/loader/shapes.py, queries/v1/canonical/empty_shapes.json)."""

from __future__ import annotations

import json

import duckdb
import pytest
from conftest import FIXTURES, craft, fixture

from nsysql import loader
from nsysql.loader import shapes
from nsysql.loader.raw import LOADER_COLUMNS, STAGE, stage

# exports whose workloads give rows to the tables of these files (their COMMAND.md): every file that declares
# `@empty_without` is one of them
RICH = {
    fixture("mem_growth"): {
        "47_gpu_memory.sql",
        "40_gpu_ops.sql",
        "42_op_launch.sql",
        "45_kernel_classes.sql",
        "80_gpu_busy.sql",
    },
    fixture("hw_mix"): {
        "48_gpu_activity.sql",
        "48_gpu_metric_counts.sql",
        "48_gpu_metrics.sql",
        "49_kernel_tensor_use.sql",
    },
    fixture("loader_cpu_after"): {"65_cpu_samples.sql", "66_cpu_threads.sql", "50_nvtx.sql", "60_op_ranges.sql"},
    fixture("graph_loop"): {"55_graph_nodes.sql"},
    FIXTURES / "ddp_blobs" / "rank0.sqlite": {"55_nvtx_payloads.sql"},
}


def _declared() -> list[tuple]:
    return [(f, g) for f in loader._order() for g in loader._header(f).empty_without]


def _everything(con) -> dict:
    """Every table and view of `con`'s current database and the staging one (not TEMP): columns, types, rows."""
    out = {}
    for db, name, view in con.execute(
        "SELECT database_name, table_name, false FROM duckdb_tables() WHERE NOT temporary "
        "UNION ALL SELECT database_name, view_name, true FROM duckdb_views() WHERE NOT temporary AND NOT internal"
    ).fetchall():
        if name.startswith("raw_") or name in loader.LOADER_TABLES:
            continue
        cols = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? AND table_name = ? "
            "ORDER BY column_index",
            [db, name],
        ).fetchall()
        out[db, name, view] = (cols, con.execute(f'SELECT * FROM "{db}"."{name}" ORDER BY ALL').fetchall())
    return out


def _macros(con) -> set:
    return {
        r[0]
        for r in con.execute(
            "SELECT function_name FROM duckdb_functions() WHERE NOT internal AND function_type LIKE '%macro%' "
            "UNION ALL SELECT type_name FROM duckdb_types() WHERE NOT internal"
        ).fetchall()
    }


def test_the_shapes_file_is_what_a_run_on_empty_inputs_gives():
    """A canonical file whose output changes shape fails here until `python scripts/canonical_shapes.py`."""
    assert json.loads(shapes.shapes_file().read_text(encoding="utf-8")) == shapes.measure()


def test_each_declaration_names_inputs_the_file_reads():
    for f, group in _declared():
        head = loader._header(f)
        assert group and set(group) <= set(head.staging) | set(head.tables), f.name


def _build(path, monkeypatch, off: bool):
    monkeypatch.setenv("NSYSQL_NO_TUNING", "empty_inputs" if off else "")
    con = duckdb.connect()
    loader.build(loader.open_source(path), con)
    return con


# train_small lacks CPU samples, GPU memory, metrics, graph nodes and NVTX payloads; copies of it without NVTX
# events, or without GPU work, leave more files unrun
WITHOUT = {
    "train_small": (),
    "no_nvtx": ("DELETE FROM NVTX_EVENTS",),
    "no_gpu_work": tuple(f"DELETE FROM CUPTI_ACTIVITY_KIND_{k}" for k in ("KERNEL", "MEMCPY")),
}


@pytest.mark.parametrize("name", WITHOUT)
def test_tables_made_empty_equal_a_run_of_the_file(name, monkeypatch, tmp_path):
    """A whole build with the files of empty inputs left unrun and one running every file: the same tables,
    views, columns, types, rows, macros and types."""
    path = craft(tmp_path / f"{name}.sqlite", *WITHOUT[name])
    made, ran = _build(path, monkeypatch, False), _build(path, monkeypatch, True)
    assert _everything(made) == _everything(ran)
    assert _macros(made) == _macros(ran)


def test_every_file_on_empty_staging_gives_the_same_definitions(monkeypatch):
    """On staging tables that are all empty (every declaration applies): the same definitions as running every
    file."""
    out = []
    for off in (False, True):
        monkeypatch.setenv("NSYSQL_NO_TUNING", "empty_inputs" if off else "")
        con = shapes.empty_staging()
        loader.run_files(con)
        out.append((_everything(con), _macros(con)))
    assert out[0] == out[1]


def test_every_declaring_file_is_tried_on_an_export_it_gives_rows():
    assert {f.name for f, _ in _declared()} == set().union(*RICH.values())


@pytest.mark.parametrize("path", RICH, ids=lambda p: p.parent.name)
def test_a_declaration_holds_where_its_inputs_have_rows(path, monkeypatch):
    """Each `@empty_without` set of the files RICH names for `path`, where they define rows: its inputs emptied
    (shadowed by empty TEMP tables of the same columns), the file run in full defines only empty tables and
    views."""
    monkeypatch.setenv("NSYSQL_NO_TUNING", "empty_inputs")
    con = duckdb.connect()
    stage(loader.open_source(path), con)
    for name, columns in LOADER_COLUMNS.items():  # (read by no declaring file)
        con.execute(f"CREATE TABLE {STAGE}.{name}({columns})")
    loader.run_files(con)
    for f, group in reversed(_declared()):  # (files after it are checked already)
        if f.name not in RICH[path]:
            continue
        defined = set(loader._header(f).defines) & _tables_and_views(con)
        assert any(con.execute(f"SELECT count(*) FROM {d}").fetchall()[0][0] for d in defined), (f.name, group)
        for t in group:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {t} AS SELECT * FROM {t} LIMIT 0")
        con.execute(f.read_text(encoding="utf-8"))
        for t in group:
            con.execute(f"DROP TABLE temp.{t}")
        for d in defined:
            assert con.execute(f"SELECT count(*) FROM {d}").fetchall()[0][0] == 0, (path.name, f.name, group, d)
        con.execute(f.read_text(encoding="utf-8"))  # its rows again, for its other sets


def _tables_and_views(con) -> set:
    return {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
        ).fetchall()
    }
