"""Resolve a --range PATTERN to NVTX range names: exact name, numbered family, prefix, then regex."""

from __future__ import annotations

import re

from ..errors import NsysqlError
from ._sql import run


def numbered_family(names: list[str], pattern: str) -> list[str]:
    rx = re.compile(re.escape(pattern) + r"[\s_#:-]*\d+")
    return [n for n in names if rx.fullmatch(n)]


def resolve_range(con, pattern: str) -> tuple[list[str], str]:
    """Range names `pattern` selects and how it matched: 'exact', 'numbered', 'prefix' or 'regex'.

    `Batch` selects `Batch0..Batch59` (numbered) when no range is called exactly `Batch`.
    """
    names = run(con, "range_names")["name"].to_list()
    if not names:
        raise NsysqlError("the profile has no NVTX ranges, so --range cannot select any")
    if pattern in names:
        return [pattern], "exact"
    fam = numbered_family(names, pattern)
    if fam:
        return fam, "numbered"
    pre = [n for n in names if n.startswith(pattern)]
    if pre:
        return pre, "prefix"
    found = _regex(con, pattern)
    if found:
        return found, "regex"
    some = ", ".join(sorted(set(_family(n) for n in names))[:8])
    raise NsysqlError(f"no NVTX range matches {pattern!r} (ranges here: {some})")


def _regex(con, pattern: str) -> list[str]:
    """Names the regex `pattern` finds, matched by DuckDB (RE2, linear time: no pattern backtracks for
    minutes); a pattern RE2 cannot read selects nothing."""
    import duckdb

    try:
        return run(con, "range_regex", pattern=pattern)["name"].to_list()
    except duckdb.Error:
        return []


def _family(name: str) -> str:
    m = re.fullmatch(r"(.*?\D)[\s_#:-]*\d+", name)
    return (m.group(1) + "*") if m else name
