"""How sentences quote a name the profile gave (an NVTX range's): in backticks, or said to be unnamed where it is
empty, as an empty code span says nothing."""

from __future__ import annotations

# an NVTX range pushed or started without a message (NULL or empty text in the export)
UNNAMED = "(unnamed range)"


def quoted(name: str | None) -> str:
    """`name` in backticks, or UNNAMED where it is NULL, empty or only white space."""
    return f"`{name}`" if name and name.strip() else UNNAMED
