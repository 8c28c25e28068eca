"""`nsysql export`: canonical tables as Parquet/CSV with a README of their columns; read back with DuckDB."""

from __future__ import annotations

import duckdb
import pytest
from click.testing import CliRunner
from conftest import fixture, loaded

from nsysql.cli import main
from nsysql.export import schema_docs
from nsysql.loader import CANONICAL_TABLES


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_round_trip(tmp_path, fmt):
    path = fixture("train_small")
    r = CliRunner().invoke(main, ["export", str(path), "--to", str(tmp_path), "--format", fmt])
    assert r.exit_code == 0, r.output
    con = loaded(str(path)).con
    reader = "read_parquet" if fmt == "parquet" else "read_csv_auto"
    for t in CANONICAL_TABLES:
        f = tmp_path / f"{t}.{fmt}"
        assert f.exists(), t
        n = con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        back = duckdb.sql(f"SELECT count(*) FROM {reader}('{f}')").fetchall()[0][0] if n else 0
        assert back == n, t
    assert con.execute("SELECT count(*) FROM gpu_ops").fetchone()[0] == 679  # known size of train_small


def test_parquet_keeps_values(tmp_path):
    path = fixture("train_small")
    loaded(str(path)).export(tmp_path)
    got = duckdb.sql(
        f"SELECT sum(duration_ns), count(*) FROM read_parquet('{tmp_path / 'gpu_ops.parquet'}') WHERE kind = 'kernel'"
    ).fetchall()[0]
    want = (
        loaded(str(path)).con.execute("SELECT sum(duration_ns), count(*) FROM gpu_ops WHERE kind = 'kernel'").fetchone()
    )
    assert got == want


def test_readme_lists_every_column(tmp_path):
    path = fixture("train_small")
    loaded(str(path)).export(tmp_path, format="csv")
    readme = (tmp_path / "README.md").read_text()
    con = loaded(str(path)).con
    docs = schema_docs()
    for t in CANONICAL_TABLES:
        assert f"## {t}" in readme
        for (col,) in con.execute(f"SELECT column_name FROM (DESCRIBE {t})").fetchall():
            assert col in docs[t]["columns"], (t, col)  # every column has a comment in the SQL
            assert f"| `{col}` |" in readme
    assert "| `api_tid` | BIGINT | thread that launched it |" in readme
    assert "CUDA stream id" in readme


def test_gpu_busy_is_exported_in_device_and_time_order(tmp_path):
    """gpu_busy promises no stored order (canonical/80_gpu_busy.sql); its exported file lists each device's stretches in
    time order, as nsys users read a timeline."""
    path = fixture("big_step")
    loaded(str(path)).export(tmp_path, format="csv")
    rows = duckdb.sql(f"SELECT device_id, start_ns FROM read_csv_auto('{tmp_path / 'gpu_busy.csv'}')").fetchall()
    assert len(rows) > 5000 and rows == sorted(rows)
