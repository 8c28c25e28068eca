"""Which export a command means when it names none: FILE, else $NSYSQL_PROFILE, else the only nsys export in
the current directory, else the one analysed last (remembered in the cache directory's `last_profile`)."""

from __future__ import annotations

import os
from pathlib import Path

from . import store
from .errors import NsysqlError
from .loader.source import looks_like_sqlite, special_file


def state_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache directory (store.directory)."""
    return store.directory(cache_dir)


def remember(path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> None:
    """Note `path` as the profile analysed last, as the user named it, made absolute: a link is kept as the
    link (`latest.sqlite`, repointed at each run, is the profile meant next time, and what `nsysql: using`
    names), a report as the report (not the export made of it, which may be a temporary file gone at exit). Not
    normalized either: `..` after a link is the kernel's to resolve. A cache directory that cannot be written is
    no error."""
    path = Path(os.path.expanduser(path)).absolute()
    try:
        d = state_dir(cache_dir)
        d.mkdir(parents=True, exist_ok=True)
        store.write(d / "last_profile", lambda tmp: tmp.write_bytes(os.fsencode(str(path))))  # the name's bytes
    except OSError:
        pass


def pick_profile(file: str | None, cache_dir: str | os.PathLike | None = None) -> tuple[str, str | None]:
    """The export meant, and why it was chosen when `file` is None (a few words, for stderr); NsysqlError when
    nothing is found or the choice is ambiguous."""
    if file:
        return file, None
    env = os.environ.get("NSYSQL_PROFILE")
    if env:
        return env, "$NSYSQL_PROFILE"
    found = sorted(Path(".").glob("*.sqlite"))
    special = {p: special_file(p) for p in found}
    # only regular files are opened to look at their header: opening a FIFO would wait for a writer
    here = [p for p in found if not special[p] and looks_like_sqlite(p)]
    odd = [p for p in found if special[p]]
    if not here and odd:
        raise NsysqlError(
            "no FILE given, and no .sqlite file here is an export: "
            + ", ".join(f"{p} is {special[p]}" for p in odd[:4])
            + "; name one"
        )
    if len(here) == 1:
        return str(here[0]), "the only .sqlite file in this directory"
    last = state_dir(cache_dir) / "last_profile"
    if len(here) == 0 and last.exists() and not special_file(last):  # a FIFO there would block the read
        try:  # the bytes of a name, whatever they are (a name that is not UTF-8 is refused by the load, in one line)
            p = os.fsdecode(last.read_bytes().strip())
        except OSError:
            p = ""
        if p and Path(p).exists():
            return p, "the profile analysed last"
    if len(here) > 1:
        raise NsysqlError(
            f"no FILE given and {len(here)} .sqlite files here ({', '.join(map(str, here[:4]))}): name one"
        )
    raise NsysqlError("no FILE given, $NSYSQL_PROFILE unset, no .sqlite export here and none analysed before")
