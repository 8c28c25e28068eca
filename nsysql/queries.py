"""Find and read the SQL files of `queries/` (inside the wheel, or beside the package in a checkout), and their
declarations.

Every SQL file opens with a header of declarations, one `-- @key value, value, ...` line each (a key may repeat:
its values add up), in the comment block the file starts with, as Perfetto's SQL standard library opens each
module with the modules it includes:

- `@include`  (canonical files) the canonical files whose definitions it reads: the loader runs a file once
  those are done (`canonical_order`), and runs no file before them;
- `@staging`  (canonical files) the loader's staging tables it reads (`raw_*` from raw.py, and the loader's own
  `nsysql_stage._load_*`, which a file reads qualified);
- `@tables`   the canonical tables and views it reads;
- `@macros`   the macros and types (of canonical files) it calls;
- `@defines`  (canonical files) the tables, views, macros and types it creates for other files (TEMP ones are
  its own and not declared);
- `@empty_without` (canonical files) staging or canonical tables it reads such that, when every one of them is
  empty, every table it defines is empty too: the loader then creates those tables empty, of the shapes a run
  would give them, without running the file (`loader.shapes`); each such line is one set, any set suffices;
- `@frames`   (analyses) tables its caller registers on the connection (polars frames), not canonical ones;
- `@param`    (analyses) one line per parameter: `$name TYPE: what it means`.

The declarations are checked against the SQL below them (tests/test_sql_declarations.py): a name a file reads
that it does not declare, a declaration no file provides, or a cycle of includes fails there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

SCHEMA_VERSION = "v1"

KEYS = ("include", "staging", "tables", "macros", "defines", "empty_without", "frames", "param")


@lru_cache(maxsize=1)
def queries_dir() -> Path:
    here = Path(__file__).resolve().parent
    for cand in (here / "queries", here.parent / "queries"):
        if (cand / SCHEMA_VERSION).is_dir():
            return cand / SCHEMA_VERSION
    raise FileNotFoundError("nsysql's SQL files (queries/) are missing from this installation")


@lru_cache(maxsize=None)
def read(relpath: str) -> str:
    """Text of `queries/v1/<relpath>`, e.g. read('analyses/kernels.sql')."""
    return (queries_dir() / relpath).read_text(encoding="utf-8")


def canonical_files() -> list[Path]:
    return sorted((queries_dir() / "canonical").glob("*.sql"))


@dataclass
class Declarations:
    """What a SQL file's header declares (see the module's docstring): values by key, in the header's order."""

    include: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    macros: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    # each line: a set of inputs whose emptiness makes every table the file defines empty
    empty_without: list[list[str]] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    # parameter name (without `$`) -> its line: `TYPE: what it means`
    param: dict[str, str] = field(default_factory=dict)


_DECLARATION = re.compile(r"--\s*@([a-z_]+)\s+(.*)")


def declarations(sql: str, name: str = "") -> Declarations:
    """The declarations of a SQL file's text (`name`: the file, for errors): the `-- @key ...` lines of the
    comment block it opens with. An unknown key, or a declaration below the header, is an error: a declaration
    nobody reads would be a promise nobody checks."""
    out = Declarations()
    header = True
    for n, line in enumerate(sql.splitlines(), start=1):
        s = line.strip()
        if header and s and not s.startswith("--"):
            header = False
        m = _DECLARATION.match(s)
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip()
        if key not in KEYS:
            raise ValueError(f"{name}:{n}: unknown declaration @{key}")
        if not header:
            raise ValueError(f"{name}:{n}: @{key} below the file's header")
        if key == "param":
            pm = re.match(r"\$([a-z_][a-z0-9_]*)\s+(.*)", value)
            if not pm:
                raise ValueError(f"{name}:{n}: @param wants `$name TYPE: meaning`")
            out.param[pm.group(1)] = pm.group(2)
        elif key == "empty_without":
            out.empty_without.append([v for v in re.split(r"[,\s]+", value) if v])
        else:
            getattr(out, key).extend(v for v in re.split(r"[,\s]+", value) if v)
    return out


def canonical_order(files: list[Path] | None = None) -> dict[Path, list[Path]]:
    """The canonical files in an order that runs each after the files it includes, each with those files: the
    DAG of their `@include` declarations. An include of a file that is not there, or a cycle, is an error."""
    files = canonical_files() if files is None else list(files)
    by_name = {f.name: f for f in files}
    includes = {}
    for f in files:
        names = declarations(f.read_text(encoding="utf-8"), f.name).include
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ValueError(f"{f.name}: @include of {', '.join(missing)}, which is not a canonical file")
        includes[f] = [by_name[n] for n in names]
    order: dict[Path, list[Path]] = {}
    visiting: list[Path] = []

    def visit(f: Path) -> None:
        if f in order:
            return
        if f in visiting:
            cycle = visiting[visiting.index(f) :] + [f]
            raise ValueError("@include cycle: " + " -> ".join(g.name for g in cycle))
        visiting.append(f)
        for g in includes[f]:
            visit(g)
        visiting.pop()
        order[f] = includes[f]

    for f in files:
        visit(f)
    return order
