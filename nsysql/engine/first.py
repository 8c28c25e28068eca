"""What a request's first pass over an export reads, known before the declarations are imported.

A cold load starts reading the export before DuckDB, polars and the analyses are imported (nsysql.store.opening),
so the staging tables its readers start on cannot come from the registry (nsysql.analyses.catalog, which the
import of the analyses fills). first_reads.json, beside this module, holds what the registry says of each
analysis: the canonical definitions a request for it with its default parameters reads (`Engine.plan_request`'s
`tables_of` for a composition such as `summary`, `reads` for one with SQL files), and the parameters whose
values choose parts of it (`Analysis.only`), with their defaults. `python scripts/readme_commands.py` writes it
with the CLI's declared.json, and its `--check` (tests/test_readme_commands.py) fails when it is stale.

It is a hint: the load reads these tables' rows in its first pass, with its base tables, and the question then
builds what it reads as ever (a hint that said too little costs a second pass, one that said too much the
reading of rows no answer uses).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

FILE = Path(__file__).with_name("first_reads.json")


@lru_cache(maxsize=1)
def _plans() -> dict:
    try:
        return json.loads(FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no hint: the load reads its base tables first, as without one
        return {}


def first_reads(name: str, params: dict | None = None) -> list[str] | None:
    """The canonical definitions a request for analysis `name` with `params` (those given; the rest take their
    defaults) reads, or None where they are not known before the registry is: an unknown name, or values of
    parameters that choose what is read other than their defaults, but for one such parameter whose value
    first_reads.json lists (its `when`: `metrics --by iteration`)."""
    plan = _plans().get(name)
    if plan is None:
        return None
    given = params or {}
    moved = [p for p, default in plan["chosen_by"].items() if p in given and _json(given[p]) != default]
    if not moved:
        return list(plan["reads"])
    if len(moved) > 1:
        return None
    got = plan.get("when", {}).get(moved[0], {}).get(json.dumps(_json(given[moved[0]])))
    return None if got is None else list(got)


def _json(value):
    """A value as first_reads.json writes it (JSON, other objects by str)."""
    return json.loads(json.dumps(value, default=str))
