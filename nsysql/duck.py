"""Every DuckDB connection nsysql opens is opened by `connect`, one way, whatever it is for (the cache entry being
built or read, the profile's own connection and its workers' cursors, the `sql` sandbox, the cross-rank
reduction, `cache info`'s look at an entry). tests/test_hostile_output.py fails if `duckdb.connect(` appears
anywhere else in nsysql.

- Extensions: DuckDB loads (and downloads) a known extension the moment a query or a database name needs one:
  a database named `md:...` is MotherDuck's, `s3://` and `http://` are httpfs's. None of nsysql's SQL needs an
  extension beyond those built in (parquet, json, icu), so autoload, autoinstall and community extensions are off
  at connect, before any statement runs; a name or path from the user or the export then fails as a missing
  table or file instead of reaching the network.
- Paths are always paths: a database file is passed to DuckDB as an absolute path (`quoted_path` in ATTACH), so
  a cache directory named `md:` or `s3:` is a directory, never a URL.
- External access: a connection that touches only files known when it opens (`files=[...]`: the entry it
  reads, its spill directory) gets `enable_external_access = false` with those directories allowed, so no query
  on it reads or writes anything else. The profile's own connection keeps file access (`files=None`): `export`
  writes Parquet through it (COPY), and it is `Profile.con`, the user's own connection; nsysql's SQL on it reads
  only the canonical tables, and no text of the export is ever run as SQL.
- Spill files go to `spill_dir()`: a directory of this user's, mode 0700, that is not a link (see there).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

MEMORY = ":memory:"
# fixed at connect, before the first statement: no extension is loaded or fetched behind nsysql's back
LOCKED = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}


def connect(
    database: str | os.PathLike = MEMORY,
    config: dict | None = None,
    *,
    read_only: bool = False,
    files: Iterable[str | os.PathLike] | None = None,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to `database` (":memory:", or a file path, made absolute) with `config` (nsysql's
    memory limit, threads, spill directory; the spill directory defaults to spill_dir()) and extensions locked
    (LOCKED). `files`: the directories this connection may read and write besides its own database (the spill
    directory is added); every other file and URL is then refused (`enable_external_access = false`). None:
    file access stays on (the profile's own connection; see the module's docstring)."""
    import duckdb

    config = {**(config or {}), **LOCKED}
    config.setdefault("temp_directory", spill_dir())
    con = duckdb.connect(path(database), read_only=read_only, config=config)
    try:
        if files is not None:
            allowed = [_dir(f) for f in [*files, config["temp_directory"]]]
            con.execute("SET allowed_directories = $dirs", {"dirs": allowed})
            con.execute("SET enable_external_access = false")
    except BaseException:
        con.close()
        raise
    return con


def path(database: str | os.PathLike) -> str:
    """`database` as DuckDB must see it: ":memory:", or an absolute path (DuckDB reads `md:x`, `motherduck:x`,
    `s3://x` or `http://x` as services, whatever exists on disk under that name; `/abs/md:x` is a file)."""
    text = os.fspath(database)
    return text if text == MEMORY else os.path.abspath(text)


def quoted_path(p: str | os.PathLike) -> str:
    """`p` as an SQL string literal of its absolute path (for ATTACH and COPY)."""
    return "'" + os.path.abspath(os.fspath(p)).replace("'", "''") + "'"


def _dir(p: str | os.PathLike) -> str:
    return os.path.join(os.path.abspath(os.fspath(p)), "")  # DuckDB matches allowed directories by prefix


def spill_dir() -> str:
    """Where DuckDB spills what exceeds its memory limit: `$TMPDIR/nsysql-spill-<uid>`, created mode 0700. That
    name is predictable, so another user can make it first: used only when it is a directory (not a link), owned
    by this user, and reachable by no one else (a 0755 one of this user's, left by an older nsysql, is made 0700);
    otherwise this process spills to a fresh private directory of its own (`mkdtemp`), and says so once."""
    return _spill_dir()


@functools.lru_cache(maxsize=1)
def _spill_dir() -> str:
    import stat
    import tempfile  # here, not at import: the CLI imports this module before it starts reading the export

    uid = os.getuid() if hasattr(os, "getuid") else None
    shared = os.path.join(tempfile.gettempdir(), f"nsysql-spill-{uid if uid is not None else 0}")
    if uid is None:  # no users to keep apart (Windows)
        return shared
    try:
        os.mkdir(shared, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return _private(shared, e.strerror.lower() if e.strerror else type(e).__name__)
    try:
        st = os.lstat(shared)
    except OSError as e:
        return _private(shared, e.strerror.lower() if e.strerror else type(e).__name__)
    if stat.S_ISLNK(st.st_mode):
        return _private(shared, "a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        return _private(shared, "not a directory")
    if st.st_uid != uid:
        return _private(shared, f"owned by uid {st.st_uid}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(shared, 0o700, follow_symlinks=False)
        except (OSError, NotImplementedError) as e:
            return _private(shared, f"mode {stat.S_IMODE(st.st_mode):o} ({e.strerror or e})")
    return shared


_fresh: list[str] = []  # this process's own spill directory, if the shared one could not be used


def _private(shared: str, why: str) -> str:
    import atexit
    import tempfile

    fresh = tempfile.mkdtemp(prefix="nsysql-spill-")  # mode 0700, created by this process
    _fresh.append(fresh)
    atexit.register(remove_fresh_spill_dir)  # the CLI leaves through os._exit, and removes it itself
    warnings.warn(f"not spilling to {shared} ({why}); using {fresh}", SpillWarning, stacklevel=4)
    return fresh


def remove_fresh_spill_dir() -> None:
    """Remove this process's own spill directory (see spill_dir) as the process ends: only this process wrote
    into it (made by mkdtemp, mode 0700), and no query runs any more."""
    import shutil

    for d in _fresh:
        shutil.rmtree(d, ignore_errors=True)


class SpillWarning(UserWarning):
    """The shared spill directory was not safe to use; nsysql used a private one."""
