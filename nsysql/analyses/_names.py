"""How sentences quote a name the profile gave (an NVTX range's): in backticks, or said to be unnamed where it is
empty, as an empty code span says nothing."""

from __future__ import annotations

# an NVTX range pushed or started without a message (NULL or empty text in the export)
UNNAMED = "(unnamed range)"


def quoted(name: str | None) -> str:
    """`name` in backticks, or UNNAMED where it is NULL, empty or only white space, or UNNAMED itself (the title
    of such ranges' column in iterations, which the findings quote back)."""
    return f"`{name}`" if name and name.strip() and name != UNNAMED else UNNAMED


def titled(name: str | None) -> str:
    """A range name as a column title shows it (iterations' per-child columns): UNNAMED where quoted() says so,
    never an empty title before the column's suffix."""
    return name if name and name.strip() else UNNAMED


def untitled(title: str) -> str:
    """The range name behind a column title of titled(): "" for UNNAMED (as nvtx_ranges holds a NULL name)."""
    return "" if title == UNNAMED else title


def family_said(family: str | None, names=()) -> str:
    """A range family as a sentence names it: quoted(family), or, where the family is empty though its ranges have
    names (names of a number alone, `0`, `1`, ...: family_name strips the number, 00_macros.sql), those ranges by
    their first name, never UNNAMED, which is for ranges without a name."""
    if family and family.strip():
        return quoted(family)
    named = sorted((n for n in names if n and n.strip()), key=lambda n: (len(n), n))
    return f"ranges named by a number alone (`{named[0]}`, ...)" if named else UNNAMED
