"""How sentences quote a name the profile gave (an NVTX range's): in backticks, or said to be unnamed where it is
empty, as an empty code span says nothing; how much of a long name they quote (`cut`); and how they say a length
of time that may run to hours (`said_ns`)."""

from __future__ import annotations

import re

# an NVTX range pushed or started without a message (NULL or empty text in the export)
UNNAMED = "(unnamed range)"
# UNNAMED in as many backticks on each side (none included): a real name that would read as UNNAMED, or as the
# title of such a name, and so is titled in one more pair (titled), which untitled takes off again
_LOOKALIKE = re.compile(r"(`*)\(unnamed range\)\1")


def quoted(name: str | None) -> str:
    """A range's name in backticks, or UNNAMED where it is NULL, empty or only white space: a range really named
    "(unnamed range)" is quoted as any name is, so it never reads as the ranges without one. Given a column title
    (titled), quote untitled(title)."""
    return f"`{name}`" if name and name.strip() else UNNAMED


def titled(name: str | None) -> str:
    """A range name as a column title shows it (iterations' per-child columns, gaps' `host:` causes): UNNAMED
    where quoted() says so, never an empty title before the column's suffix; a real name that reads as UNNAMED
    (or as this title of one) in one more pair of backticks, so that no two names share a title."""
    if not (name and name.strip()):
        return UNNAMED
    return f"`{name}`" if _LOOKALIKE.fullmatch(name) else name


def untitled(title: str) -> str:
    """The range name behind a column title of titled(): "" for UNNAMED (as nvtx_ranges holds a NULL name)."""
    if title == UNNAMED:
        return ""
    return title[1:-1] if _LOOKALIKE.fullmatch(title) else title


def cut(name: str, n: int) -> str:
    """`name` as a sentence quotes it: at most `n` characters, cut with `…`."""
    return name if len(name) <= n else name[: n - 1] + "…"


def family_said(family: str | None, names=()) -> str:
    """A range family as a sentence names it: quoted(family), or, where the family is empty though its ranges have
    names (names of a number alone, `0`, `1`, ...: family_name strips the number, 00_macros.sql), those ranges by
    their first name, never UNNAMED, which is for ranges without a name."""
    if family and family.strip():
        return quoted(family)
    named = sorted((n for n in names if n and n.strip()), key=lambda n: (len(n), n))
    return f"ranges named by a number alone (`{named[0]}`, ...)" if named else UNNAMED


def some_of(items: list[str], shown: int = 6, note: str = "") -> str:
    """The items joined with commas, the first `shown` where there are more, with how many in all, and `note`
    in the same parentheses (`9, 11, 13, 15, 17, 19, … (16 in all, every 2nd)`): a sentence about an export of a
    thousand processes stays a sentence."""
    notes = ([f"{len(items)} in all"] if len(items) > shown else []) + ([note] if note else [])
    said = ", ".join(items[:shown]) + (", …" if len(items) > shown else "")
    return said + (f" ({', '.join(notes)})" if notes else "")


# From this length on a sentence says seconds: a capture of hours is "14,404.9 s", not "14404907.0 ms"
SECONDS_FROM_NS = 100 * 10**9


def said_ns(ns: float, ms_digits: int = 1) -> str:
    """A length of time as a sentence says it: us under a millisecond, ms (`ms_digits` decimals) under
    SECONDS_FROM_NS, seconds from there; thousands separated."""
    if abs(ns) >= SECONDS_FROM_NS:
        return f"{ns / 1e9:,.1f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.{ms_digits}f} ms"
    return f"{ns / 1e3:,.1f} us"


def said_bytes(n: int) -> str:
    """A number of bytes as a sentence says it: in the largest binary unit it reaches, 4 significant digits
    (1.5 GiB, 512 KiB, 12 B)."""
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= k:
            return f"{n / k:.4g} {unit}"
    return f"{n} B"
