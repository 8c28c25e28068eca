"""What the canonical files that declare `@empty_without` define when those inputs are empty, without running them.

A canonical file costs DuckDB's planning of each of its statements even where its inputs are empty (the NVTX
payload decoder: a dozen statements, tens of ms of CPU on an export without payloads). A file whose header says
`-- @empty_without a, b` defines only empty tables when `a` and `b` are both empty (tests/test_empty_inputs.py
checks each such line on exports where they are not); the loader then creates those tables empty, with the
columns and types a run of the file gives them, and runs only the file's other definitions (views, macros,
types), which are cheap to plan.

The columns, types and statements come from a run of every canonical file on empty staging tables, kept in
`queries/v1/canonical/empty_shapes.json` (`python scripts/canonical_shapes.py` writes it; a test fails when it
differs from a fresh run, so it cannot drift from the SQL).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from ..queries import queries_dir

# a statement that defines something other than a table and outlives the file (not TEMP)
_OTHER = re.compile(r"CREATE\s+(OR\s+REPLACE\s+)?(VIEW|MACRO|FUNCTION|TYPE)\b", re.IGNORECASE)


def shapes_file() -> Path:
    return queries_dir() / "canonical" / "empty_shapes.json"


@lru_cache(maxsize=1)
def _shapes() -> dict:
    return json.loads(shapes_file().read_text(encoding="utf-8"))


def empty_definitions(name: str) -> str:
    """The SQL that defines what canonical file `name` defines, its tables empty: CREATE OR REPLACE of each table
    with the columns and types a run gives it (in the staging database for those the file puts there), then the
    file's own statements for its views, macros and types."""
    from .raw import STAGE

    entry = _shapes()["files"][name]
    out = []
    for table in entry["tables"]:
        shape = _shapes()["tables"][table]
        where = f"{STAGE}.{table}" if shape["staging"] else table
        cols = ", ".join(f'"{c}" {t}' for c, t in shape["columns"])
        out.append(f"CREATE OR REPLACE TABLE {where} ({cols})")
    return ";\n".join([*out, *entry["statements"]])


def _statement(query: str) -> str:
    """A statement without the comment lines and blank lines it opens with."""
    lines = query.strip().splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines).strip()


def empty_staging():
    """A DuckDB connection (in memory) holding every staging table the loader makes, empty, in its search path."""
    from ..duck import connect
    from .raw import LOADER_COLUMNS, RAW_TABLES, STAGE, q

    con = connect()
    con.execute(f"ATTACH ':memory:' AS {STAGE}")
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    con.execute(f"SET search_path = '{db},{STAGE}'")
    for rt in RAW_TABLES:
        con.execute(f"CREATE TABLE {STAGE}.{rt.name} ({', '.join(f'{q(c)} {t}' for c, t in rt.columns)})")
    for name, columns in LOADER_COLUMNS.items():
        con.execute(f"CREATE TABLE {STAGE}.{name}({columns})")
    return con


def measure() -> dict:
    """Run every canonical file on empty staging tables (in memory) and say, for each table they define, its
    database and columns, and for each file that declares `@empty_without`, its tables and its statements that
    define views, macros and types."""
    import duckdb

    from ..queries import canonical_order, declarations
    from .raw import LOADER_COLUMNS, RAW_TABLES, STAGE

    con = empty_staging()
    order = canonical_order()
    for f in order:  # every file run, whatever `@empty_without` says
        con.execute(f.read_text(encoding="utf-8"))
    raw = {rt.name for rt in RAW_TABLES} | set(LOADER_COLUMNS)
    tables: dict[str, dict] = {}
    for database, table, column, dtype in con.execute(
        "SELECT c.database_name, c.table_name, c.column_name, c.data_type FROM duckdb_columns() c "
        "JOIN duckdb_tables() t USING (database_name, schema_name, table_name) "
        "WHERE NOT t.temporary ORDER BY c.database_name, c.table_name, c.column_index"
    ).fetchall():
        if table not in raw:
            entry = tables.setdefault(table, {"staging": database == STAGE, "columns": []})
            entry["columns"].append([column, dtype])
    files = {}
    for f in order:
        text = f.read_text(encoding="utf-8")
        head = declarations(text, f.name)
        if not head.empty_without:
            continue
        kept = [_statement(s.query) for s in duckdb.extract_statements(text)]
        files[f.name] = {
            "tables": [d for d in head.defines if d in tables],
            "statements": [s for s in kept if _OTHER.match(s)],
        }
    return {"tables": dict(sorted(tables.items())), "files": files}


def write() -> Path:
    """Write `measure()` into the shapes file; its path."""
    path = shapes_file()
    path.write_text(json.dumps(measure(), indent=1) + "\n", encoding="utf-8")
    return path
