"""What a file is, told by stat and its first bytes alone: a SQLite database, an Nsight Systems report, or not a
regular file at all. The loader, the nsys integration and the CLI's `-o` guard all ask here, so that each says
the same thing about one file; nothing here opens a file that is not regular.
"""

from __future__ import annotations

import os
import stat

SQLITE_MAGIC = b"SQLite format 3\x00"
# the suffixes of the files nsys writes for a report, in any case
REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".qdstrm")

_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def special_file(path: str | os.PathLike) -> str | None:
    """What `path` is when it exists and is not a regular file (links followed): "a FIFO (named pipe)", "a
    socket", ...; None for a regular file or a path that cannot be stat'ed (the open that follows says why).
    Only stat: nothing is opened, so a FIFO with no writer cannot block the caller."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _SPECIAL if test(mode)), "not a regular file")


# How a report's bytes begin, as far as nsysql checks (see looks_like_report): a zip's local file header, or
# the QDSTRM stream's name near the start of a binary header
ZIP_MAGIC = b"PK\x03\x04"
QDSTRM_MAGIC = b"QDSTRM"


def looks_like_report(path: str | os.PathLike, head: bytes) -> bool:
    """Whether a file that is not SQLite is an Nsight Systems report: by its suffix (`.nsys-rep`, `.qdrep`,
    `.qdstrm`, in any case), or by its first bytes `head` (at least 64): a zip's local file header, or QDSTRM in
    a binary header. Text is never a report, whatever words it holds ("nsys" in a README or a log is not one)."""
    if str(path).lower().endswith(REPORT_SUFFIXES):
        return True
    if head.startswith(ZIP_MAGIC):
        return True
    first = head[:64]
    return QDSTRM_MAGIC in first and any(b < 0x09 or 0x0E <= b < 0x20 for b in first)
