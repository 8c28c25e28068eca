"""Export the canonical tables as Parquet or CSV files, with a README.md that documents every column.

The column descriptions come from the `-- comment` lines written just above each column in
queries/v1/canonical/*.sql (and the table descriptions from the comment lines just above each
`CREATE OR REPLACE TABLE`), so the README and the schema cannot drift apart.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
import polars as pl

from . import __version__, store
from .errors import NsysqlError
from .loader import CANONICAL_TABLES
from .queries import SCHEMA_VERSION, canonical_files

EXPORT_FORMATS = ("parquet", "csv")

# a table or view made from a query (`AS`), or a table declared by its columns (`(`), filled by an INSERT after
_CREATE = re.compile(r"^CREATE OR REPLACE (?:TEMP )?(TABLE|VIEW) (\w+) (?:AS|\()", re.M)


def _column_name(expr: str) -> str | None:
    expr = re.sub(r"\s+", " ", expr).strip().rstrip(",").strip()
    m = re.search(r"\bAS\s+\"?(\w+)\"?$", expr, re.I)
    if m:
        return m.group(1)
    m = re.search(r"(?:^|\.)\"?(\w+)\"?$", expr)
    return m.group(1) if m else None


def schema_docs() -> dict[str, dict]:
    """{table: {"file", "description", "columns": {column: description}, "exported"}} parsed from the canonical
    SQL; `exported`: whether `export` writes it (a view or a table nsysql keeps for itself is read by `sql` only)."""
    docs: dict[str, dict] = {}
    for f in canonical_files():
        lines = f.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = _CREATE.match(line)
            if not m or "TEMP" in line:
                continue
            table = m.group(2)
            desc, j = [], i - 1
            while j >= 0 and lines[j].startswith("--"):
                desc.insert(0, lines[j][2:].strip())
                j -= 1
            docs[table] = {
                "file": f"queries/{SCHEMA_VERSION}/canonical/{f.name}",
                "description": " ".join(desc),
                "columns": _columns(lines, i),
                "exported": table in CANONICAL_TABLES,
            }
    return docs


def schema_table(table: str | None = None) -> pl.DataFrame:
    """What `nsysql schema` shows: each canonical table and its description (one a view or a table nsysql keeps
    for itself says that `sql` reads it and `export` does not write it); given `table`, each of its columns and
    what it means. NsysqlError for a name that is not a canonical table."""
    docs = schema_docs()
    if table:
        if table not in docs:
            raise NsysqlError(f"no canonical table {table!r}; tables: {', '.join(docs)}")
        rows = [(table, c, d) for c, d in docs[table]["columns"].items()]
        return pl.DataFrame(rows, schema=["table", "column", "description"], orient="row")
    unwritten = " (`nsysql sql` reads it; `nsysql export` does not write it)"
    rows = [(t, i["description"] + ("" if i["exported"] else unwritten)) for t, i in docs.items()]
    return pl.DataFrame(rows, schema=["table", "description"], orient="row")


def _columns(lines: list[str], create_at: int) -> dict[str, str]:
    """Comment blocks inside the statement's outer SELECT list, each followed by its column expression."""
    end = next(
        (
            k
            for k in range(create_at, len(lines))
            if lines[k].rstrip().endswith(";") and not lines[k].lstrip().startswith("--")
        ),
        len(lines) - 1,
    )
    body = lines[create_at + 1 : end + 1]
    if lines[create_at].rstrip().endswith("("):  # a column list: each column's name opens its line
        return _declared_columns(body)
    # the outer SELECT list: from the last top-level `SELECT` line to the next top-level `FROM` line
    sel = max((k for k, ln in enumerate(body) if ln.strip() == "SELECT" and not ln.startswith(" ")), default=None)
    if sel is None:
        return {}
    out: dict[str, str] = {}
    comment: list[str] = []
    expr: list[str] = []

    def flush():
        if comment and expr:
            name = _column_name(" ".join(expr))
            if name:
                out[name] = " ".join(comment)

    for ln in body[sel + 1 :]:
        s = ln.strip()
        if not ln.startswith(" ") and s:  # FROM / WHERE / ORDER BY at column 0 ends the select list
            break
        if s.startswith("--"):
            if expr:
                flush()
                comment, expr = [], []
            comment.append(s[2:].strip())
        elif s:
            expr.append(s)
    flush()
    return out


def _declared_columns(body: list[str]) -> dict[str, str]:
    """Comment blocks inside a CREATE TABLE's column list, each followed by its column's definition."""
    out: dict[str, str] = {}
    comment: list[str] = []
    for ln in body:
        s = ln.strip()
        if s.startswith("--"):
            comment.append(s[2:].strip())
        elif s and not s.startswith(")"):
            if comment:
                out[s.split()[0].strip('"')] = " ".join(comment)
            comment = []
    return out


# Tables stored in no particular order that read best sorted: a file of gpu_busy is each device's timeline.
EXPORT_ORDER = {"gpu_busy": "device_id, start_ns"}


def export(con: duckdb.DuckDBPyConnection, to: Path, format: str = "parquet") -> pl.DataFrame:
    """Write every canonical table to `to/<table>.<format>` plus `to/README.md`; one row per table written."""
    if format not in EXPORT_FORMATS:
        raise NsysqlError(f"`format` must be parquet or csv, not {format!r}", option="format")
    to = Path(to)
    if to.exists() and not to.is_dir():
        raise NsysqlError(f"{to} exists and is not a directory")
    # Files already there under the names written here are replaced only when they are an earlier export's
    # (README.md says so): a user's own strings.csv in that directory is never overwritten.
    there = [
        p.name for p in [to / f"{t}.{format}" for t in CANONICAL_TABLES] + [to / "README.md"] if os.path.lexists(p)
    ]
    if there and not _earlier_export(to):
        more = f" and {len(there) - 1} more" if len(there) > 1 else ""
        raise NsysqlError(
            f"{to}: already holds {there[0]}{more}, which no nsysql export wrote; export replaces "
            "only the files of an earlier export (name another --to DIR)"
        )
    names = [to / f"{t}.{format}" for t in CANONICAL_TABLES] + [to / "README.md"]
    links = [p for p in names if p.is_symlink()]
    if links:  # replacing the link would do no harm, but it was put there on purpose: say so, write nothing
        raise NsysqlError(
            f"{links[0]}: is a symbolic link; export writes through no link and replaces none "
            "(remove it or name another --to DIR)"
        )
    created = not to.exists()
    to.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(names)
    opts = "FORMAT parquet, COMPRESSION zstd" if format == "parquet" else "FORMAT csv, HEADER true"
    # Every file is written under a temporary name beside its own and renamed into place once all are whole
    # (README.md first: a folder whose README is an export's is one the next export replaces): an export that
    # fails part way (a full disk) leaves the folder as it was.
    tmps: dict[Path, Path] = {}
    rows = []
    done = False
    current = to
    try:
        for t in CANONICAL_TABLES:
            current = path = to / f"{t}.{format}"
            tmps[path] = tmp = store.temp_path(path)
            order = f" ORDER BY {EXPORT_ORDER[t]}" if t in EXPORT_ORDER else ""
            con.execute(f"COPY (SELECT * FROM {t}{order}) TO '{_quote(tmp)}' ({opts})")
            n = con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            rows.append((t, n, str(path)))
        current = readme_path = to / "README.md"
        tmp = store.temp_path(readme_path)
        tmps = {readme_path: tmp, **tmps}
        tmp.write_text(readme(con, format), encoding="utf-8")
        for final, tmp in tmps.items():
            current = final
            store.commit(tmp, final)
        done = True
    except Exception as e:
        import duckdb

        if not isinstance(e, (OSError, duckdb.IOException)):
            raise
        raise NsysqlError(
            f"cannot write {current} ({store.why(e)}); " + ("nothing written" if created else f"{to} is left as it was")
        ) from None
    finally:
        for tmp in tmps.values():
            store.remove(tmp)
        if created and not done:
            try:
                to.rmdir()
            except OSError:
                pass
    return pl.DataFrame(rows, schema=["table", "rows", "file"], orient="row")


def _remove_abandoned(names: list[Path]) -> None:
    """The temporary files an export killed part way left beside these names (store.temp_path's)."""
    for p in names:
        for t in p.parent.glob(f".{p.name}.*{store.TEMP_SUFFIX}"):
            if store.abandoned(t):
                store.remove(t)


README_TITLE = "# nsysql canonical tables"


def _earlier_export(to: Path) -> bool:
    """Whether `to` holds what an earlier export wrote: its README.md, beginning as readme() begins."""
    try:
        with open(to / "README.md", encoding="utf-8", errors="replace") as f:
            return f.readline().rstrip("\n") == README_TITLE
    except OSError:
        return False


def _quote(p: Path) -> str:
    return str(p.resolve()).replace("'", "''")


def readme(con: duckdb.DuckDBPyConnection, format: str) -> str:
    docs = schema_docs()
    facts = dict(
        con.execute("SELECT key, value FROM profile_facts WHERE key IN ('source_path', 'nsys_version')").fetchall()
    )
    out = [
        README_TITLE,
        "",
        f"Exported by nsysql {__version__} (canonical schema `{SCHEMA_VERSION}`) from "
        f"`{facts.get('source_path', '?')}` (nsys {facts.get('nsys_version', 'unknown')}). One "
        f"{'Parquet' if format == 'parquet' else 'CSV'} file per table. Times are nanoseconds on the export's "
        "clock; names are stored once in `strings` and referenced by id (`*_name_id`).",
        "",
        "```python",
        f"import duckdb; duckdb.sql(\"SELECT * FROM '{'gpu_ops'}.{format}' LIMIT 5\")",
        f"import polars as pl; pl.read_{'parquet' if format == 'parquet' else 'csv'}('gpu_ops.{format}')",
        "```",
        "",
        "| table | rows | what |",
        "|---|---:|---|",
    ]
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in CANONICAL_TABLES}
    for t in CANONICAL_TABLES:
        out.append(f"| [`{t}`](#{t}) | {counts[t]:,} | {docs.get(t, {}).get('description', '')} |")
    for t in CANONICAL_TABLES:
        d = docs.get(t, {"description": "", "columns": {}, "file": ""})
        out += [
            "",
            f"## {t}",
            "",
            f"`{t}.{format}`, {counts[t]:,} rows. {d['description']}"
            + (f" Defined in `{d['file']}`." if d["file"] else ""),
            "",
            "| column | type | description |",
            "|---|---|---|",
        ]
        for name, typ in con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {t})").fetchall():
            out.append(f"| `{name}` | {typ} | {d['columns'].get(name, '').replace('|', '&#124;')} |")
    return "\n".join(out) + "\n"
