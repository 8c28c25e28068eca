"""Resolve a --range PATTERN to NVTX range names: exact name, numbered family, prefix, then regex."""

from __future__ import annotations

from ..errors import NsysqlError
from ._sql import run


def resolve_range(con, pattern: str) -> tuple[list[str], str]:
    """Range names `pattern` selects and how it matched: 'exact', 'numbered', 'prefix' or 'regex'.

    `Batch` selects `Batch0..Batch59` (numbered) when no range is called exactly `Batch`.
    """
    names = run(con, "range_names")["name"].to_list()
    if not names:
        raise NsysqlError("the profile has no NVTX ranges, so `range` cannot select any", option="range")
    if not pattern.strip():  # the ranges without a name, only those (each name would match it as a prefix)
        blank = [n for n in names if not n.strip()]
        if not blank:
            raise NsysqlError(
                f"`range` {pattern!r} selects the NVTX ranges without a name, and the profile has none", option="range"
            )
        return blank, "exact"
    if pattern in names:
        return [pattern], "exact"
    fam = run(con, "range_family", stem=pattern)["name"].to_list()
    if fam:
        return fam, "numbered"
    pre = [n for n in names if n.startswith(pattern)]
    if pre:
        return pre, "prefix"
    found = _regex(con, pattern)
    if found:
        return found, "regex"
    some = ", ".join(run(con, "range_family_labels")["label"].to_list()[:8])
    raise NsysqlError(f"no NVTX range matches {pattern!r} (ranges here: {some})")


def _regex(con, pattern: str) -> list[str]:
    """Names the regex `pattern` finds, matched by DuckDB (RE2, linear time: no pattern backtracks for
    minutes); a pattern RE2 cannot read selects nothing."""
    import duckdb

    try:
        return run(con, "range_regex", pattern=pattern)["name"].to_list()
    except duckdb.Error:
        return []
