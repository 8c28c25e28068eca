"""The store: everything nsysql keeps between runs, in one directory, under one key and one way of writing.

The cache directory is resolved here alone (`directory`). Each file a user names (an export, or an `.nsys-rep`
report) has one entry: every value stored for it is named `<name>-<key>` (`stem`), the one key (`key`):
- `<name>-<key>.nsysql`: the marker (below), written first; its modification time is the entry's last use
  (`used`), and for a report it names the report;
- `<name>-<key>.export/<name>.sqlite`: a report's SQLite export, made by `nsys export` (nsysql.nsys.export);
- `<name>-<key>.duckdb`: the canonical tables, of the export or of the report's export (store.tables);
- `<name>-<key>.results/<question>-<hash>/`: answers, as Parquet (store.answers);
- `<name>-<key>.<table>.parquet`: the per-rank frames of `nsysql ranks` (store.ranks).
`values(stem)` lists them; `cache info` shows an entry as one row, `cache clear` and the size cap (store.tables)
remove an entry's values together. nsysql 0.4.0 kept a report's export apart, under `exports/<key>/`: such
folders are recognised (by their marker, or for 0.3 by name and content), counted, trimmed and cleared, and never
read.

One completeness rule: a value is read only once it is in place under its final name, and it is put there
whole: made under a temporary name, checked (the tables hold their `complete` fact, an answer its index.json,
the per-rank frames their `info` frame, a report's export opens as an nsys export), flushed to disk and renamed
in. A value in place that does not open is removed and made again, never read half.

The key is the identity of the file named (`export_id`) and the hash of every file of code and SQL that could
have made the value (`code_hash`: all of nsysql's .py files and queries' .sql files, and nsysql's version). No
finer rule (which analysis reads which file) has to be kept right by hand: any edit to nsysql, or a new version,
starts a fresh entry, and a value in the store is always one this code would compute for this file. That holds
for a report's export too: the `nsys export` options are nsysql's code (`--include-blobs=true` since 0.4.0).

Every file is written by `write` (or `commit`, for DuckDB, which writes its own file): to a temporary file in
the same directory, named by `temp_path`, flushed to disk, then renamed into place. A reader sees the whole
file or none. A process killed meanwhile leaves only files that `temps` finds (`cache info` counts them and
`cache clear` deletes them, except those of a process still running).

Before the first value named after a key, `claim` writes the marker `<name>-<key>.nsysql`, whose text is
MARK_TEXT: the proof that the values of that name are nsysql's. `cache clear` removes only values with a marker
(`owned`), so a cache directory that is also a working folder (`--cache-dir .`) keeps the user's own files,
whatever they are called.

The files nsysql writes for the user (`-o`, reports, traces, tables) go through `output`: the same temporary
file and rename, so a failed write (a full disk, a file-size limit) leaves the file that was there as it was.

Writing is never a reason to fail: `failed` turns an error into one warning per process (`CacheWarning`) and the
caller answers from memory.

The directory holds at most `cap()` bytes (NSYSQL_CACHE_MAX, default DEFAULT_MAX): after a load stores a new
entry, store.tables.trim removes the least recently used entries first, never one in use (`in_use`).

State of the process, each for a reason: `_own` (this process's temporary files, removed on Ctrl-C), `_in_use`
(what this process loaded: not evicted under it), `_warned` (one warning per directory), store.tables' pending
background writes (waited for before exit), and `code_hash`'s one reading of nsysql's files (asked once per
export and per rank).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path

from .. import __version__

HEAD_BYTES = 1 << 20  # the export's first and last MiB go into its identity
TEMP_SUFFIX = ".tmp"


class CacheWarning(UserWarning):
    """The cache could not be used; nsysql carried on without it."""


def directory(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache directory, resolved here and nowhere else: `cache_dir` (load()'s argument, `--cache-dir`) when
    given, else $NSYSQL_CACHE_DIR, else $XDG_CACHE_HOME/nsysql, else ~/.cache/nsysql."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    env = os.environ.get("NSYSQL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "nsysql"


@functools.lru_cache(maxsize=4)
def code_hash(memo_dir: Path | None = None) -> str:
    """Hash of nsysql's version and of every .py file of the package and .sql file of its queries (beside the
    package in a checkout, inside it in a wheel), by path relative to their root. Read once per process, and
    kept for the files' sizes and modification times (`_code_memo`): in the package's __pycache__, as Python
    keeps a module's bytecode, else (where Python writes no bytecode, or the package is another user's) in
    `memo_dir`, the cache directory, where it exists: reading and hashing every file is a fixed cost of each
    command, warm ones too."""
    from ..queries import queries_dir

    package = Path(__file__).resolve().parent.parent  # nsysql/, this package's parent
    queries = queries_dir().parent
    files = [
        (root, f)
        for root, pattern in ((package, "*.py"), (queries, "*.sql"))
        for f in sorted(root.rglob(pattern))
        if "__pycache__" not in f.parts
    ]
    seen = hashlib.sha256(f"nsysql {__version__}\0".encode())
    for root, f in files:
        st = f.stat()
        seen.update(f"{root.name}/{f.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    import sys

    name = f"{_CODE_MEMO}{seen.hexdigest()[:16]}.txt"
    memos = [] if sys.dont_write_bytecode else [package / "__pycache__" / name]
    if memo_dir is not None and memo_dir.is_dir():
        memos.append(memo_dir / name)
    if name in _HASHED:  # hashed by this process already, for these sizes and times: kept here too
        if not any(memo.is_file() for memo in memos):
            any(_code_memo(memo, _HASHED[name]) for memo in memos)
        return _HASHED[name]
    for memo in memos:
        try:
            kept = memo.read_text(encoding="ascii")
            if re.fullmatch(r"[0-9a-f]{16}", kept):
                return kept
        except (OSError, ValueError):
            pass  # not kept there yet (or damaged): the next place, else hashed below
    h = hashlib.sha256(f"nsysql {__version__}\0".encode())
    for root, f in files:
        h.update(f"{root.name}/{f.relative_to(root).as_posix()}\0".encode())
        h.update(f.read_bytes())
        h.update(b"\0")
    any(_code_memo(memo, h.hexdigest()[:16]) for memo in memos)  # kept in the first place that takes it
    _HASHED[name] = h.hexdigest()[:16]
    return _HASHED[name]


_CODE_MEMO = "nsysql-code-"
_HASHED: dict[str, str] = {}
"""The hashes this process computed, by the name of their memo (of the files' sizes and modification times):
a process that opens many cache directories (a notebook's, the tests') reads and hashes the files once."""


def code_memos(directory: Path) -> list[Path]:
    """The hashes code_hash kept in `directory` (a cache directory): named and filled as it writes them, so that
    `cache clear` removes them and no file of the user's."""
    out = []
    for f in directory.glob(f"{_CODE_MEMO}*.txt"):
        try:
            if re.fullmatch(_CODE_MEMO + r"[0-9a-f]{16}\.txt", f.name) and f.is_file() and not f.is_symlink():
                if re.fullmatch(r"[0-9a-f]{16}", f.read_text(encoding="ascii")):
                    out.append(f)
        except (OSError, ValueError):
            pass  # not one of ours (unreadable, or not ASCII)
    return out


def _code_memo(memo: Path, digest: str) -> bool:
    """Keep `digest` as `memo` (written whole under a temporary name, then renamed: another process reads all of
    it or none), in place of those kept for earlier files there; False where it cannot be written (a package of
    another user's installation)."""
    tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
    try:
        memo.parent.mkdir(exist_ok=True)
        tmp.write_text(digest, encoding="ascii")
        os.replace(tmp, memo)
        for old in memo.parent.glob(f"{_CODE_MEMO}*.txt"):
            if old != memo:
                old.unlink(missing_ok=True)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False


def export_id(path: Path) -> str:
    """What tells this export from any other file at the same path: where it is (resolved path, device,
    inode), its size, mtime and ctime, and a hash of its first and last MiB. A file copied or written over
    the old one gets a new inode or ctime, whatever mtime it is given (`touch -d` sets mtime, and sets ctime
    to now)."""
    st = path.stat()
    h = hashlib.sha256()
    h.update(f"{path.resolve()}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0".encode())
    with open(path, "rb") as f:
        h.update(f.read(HEAD_BYTES))
        if st.st_size > HEAD_BYTES:
            f.seek(max(HEAD_BYTES, st.st_size - HEAD_BYTES))
            h.update(f.read(HEAD_BYTES))
    return h.hexdigest()


def key(path: Path, cache_dir: Path | None = None) -> str:
    """The one key of every value stored for the file `path` (an export, or a report): its identity and the code
    that computes them (a report's export, tables, answers and per-rank frames). `cache_dir`: where code_hash may
    keep itself."""
    return hashlib.sha256(f"{export_id(path)}\0{code_hash(cache_dir)}".encode()).hexdigest()[:32]


def stem(cache_dir: Path, path: Path) -> Path:
    """`<cache_dir>/<name>-<key>`, where every value stored for `path` is named. Only letters, digits, `.`,
    `_` and `-` of the export's name are kept: DuckDB names the attached database after the file, and a quote
    in it broke the SQL that names that database (`o'brien.sqlite` failed to load with the cache)."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in path.stem[:40])
    return cache_dir / f"{name}-{key(path, cache_dir)}"


# -- the size cap ------------------------------------------------------------------------------------------------

DEFAULT_MAX = "10GB"
_SIZE = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+))\s*([kmgt]?)(i?)(b?)\s*", re.IGNORECASE)


def cap(value: str | int | None = None, what: str = "NSYSQL_CACHE_MAX (cache_max)") -> int | None:
    """The most bytes nsysql keeps in its cache directory: `value` (load(cache_max=), `--cache-max`), else
    $NSYSQL_CACHE_MAX, else DEFAULT_MAX. A size (10GB, 500MB, 2GiB, or bytes), or `none` for no cap. An
    NsysqlError naming the setting (`what`) for anything else, so a typo is said on every run."""
    text = str(value if value is not None else os.environ.get("NSYSQL_CACHE_MAX", "")).strip() or DEFAULT_MAX
    if text.lower() == "none":
        return None
    m = _SIZE.fullmatch(text)
    if not m or (m.group(3) and not m.group(2)):
        from ..errors import NsysqlError

        raise NsysqlError(f"{what} must be a size such as 10GB, 500MB or 2GiB, or none, not {text[:40]!r}".strip())
    base = 1024 if m.group(3) else 1000
    return int(float(m.group(1)) * base ** " KMGT".index((m.group(2) or " ").upper()))


_in_use: set[Path] = set()  # the stems this process loaded: never evicted under it (see used)


def used(stem: Path) -> None:
    """Note that this process uses the values of `stem`: they are in use until it ends (`in_use`), and their
    marker's modification time, the store's clock of last use, is now (least recently used go first: trim)."""
    _in_use.add(stem)
    m = marker(stem)
    if _marks(m):
        try:
            os.utime(m)
        except OSError:  # a read-only cache: read, never trimmed by this process either
            pass


def in_use(stem: Path) -> bool:
    """Whether the values of `stem` are in use: loaded by this process, or being written by a running one."""
    return stem in _in_use or any(_temp_pid(p) is not None and not abandoned(p) for p in values(stem))


def last_use(stem: Path, listing: Listing | None = None) -> float:
    """When the values of `stem` were last used (`used`): their marker's modification time, else (an entry of
    nsysql 0.3, without marker) the newest of its files' (`listing`: as `values`)."""
    if _marks(marker(stem)):
        return marker(stem).stat().st_mtime
    times = []
    for p in values(stem, listing):
        try:
            times.append(p.lstat().st_mtime)
        except OSError:  # removed meanwhile
            continue
    return max(times, default=0.0)


EXPORT = ".export"


def export_path(report: Path, cache_dir: Path) -> Path:
    """Where the SQLite export of the report `report` is kept: in the report's entry, `<stem>.export/<report's
    name>.sqlite` (the report's own name, so that outputs named after the export, `run.report.html`, are named
    after the report). The folder is put in place whole, once the export in it opens (nsysql.nsys.export)."""
    return Path(f"{stem(cache_dir, report)}{EXPORT}") / f"{report.stem}.sqlite"


def temp_path(final: Path) -> Path:
    """A temporary name for `final`, in its directory (so the rename stays on one filesystem), unique to this
    process: `.<final name>.<pid>.<random>.tmp`."""
    import uuid  # here, not at import: the CLI imports this module before it starts reading the export

    tmp = final.with_name(f".{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")
    _own.add(tmp)
    return tmp


_own: set[Path] = set()  # this process's temporary files not yet renamed or removed


def remove_temps_of(final: Path) -> None:
    """Remove this process's temporary files for `final` (and DuckDB's `.wal` beside one): a load interrupted by
    the user leaves none, even if the process ends before the load's own clean-up runs."""
    for tmp in [t for t in _own if t.parent == final.parent and t.name.startswith(f".{final.name}.")]:
        remove(tmp)
        remove(Path(f"{tmp}.wal"))


def commit(tmp: Path, final: Path, durable: bool = True) -> None:
    """Flush the whole file `tmp` to disk and rename it to `final` (so no reader, nor a crash, can leave half a
    file under `final`). `durable=False`: renamed unflushed, for a value whose reader checks it and makes it
    again when a crash left it short (a stored answer: store.answers)."""
    if durable:
        sync(tmp)
    os.replace(tmp, final)
    _own.discard(tmp)


def sync(path: Path) -> None:
    """Flush the file `path` to disk (before the rename that puts it in place: a crash right after the rename
    must not leave a name over a file whose blocks never reached the disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MARK = ".nsysql"
MARK_TEXT = "nsysql cache: the files named as this one, less its .nsysql, are nsysql's (`nsysql cache clear`)\n"


def marker(stem: Path) -> Path:
    return Path(f"{stem}{MARK}")


def claim(stem: Path, note: str = "") -> None:
    """Write the marker of `stem` (`<stem>.nsysql`: MARK_TEXT, then `note` on one line), unless it is there:
    before any value named after `stem`, so that every value of the store has one, even one a killed process
    left half written. OSError if it cannot be written (the caller's to report: see `failed`)."""
    m = marker(stem)
    if _marks(m):
        return
    m.parent.mkdir(parents=True, exist_ok=True)
    text = MARK_TEXT + (note.replace("\n", " ") + "\n" if note else "")
    write(m, lambda tmp: tmp.write_text(text, encoding="utf-8", errors="surrogateescape"))


MARK_MAX = 1 << 16


def _marks(m: Path) -> bool:
    """Whether `m` is a marker nsysql wrote: a small plain file (not a link) that begins with MARK_TEXT."""
    return _read_mark(m) is not None


def _read_mark(m: Path) -> str | None:
    try:
        if m.is_symlink() or not m.is_file() or m.stat().st_size > MARK_MAX:
            return None
        text = m.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError:
        return None
    return text if text.startswith(MARK_TEXT) else None


def release(stem: Path) -> None:
    """Remove the marker of `stem` when no value of it is left (a load that failed or was interrupted)."""
    if not values(stem):
        remove(marker(stem))


def note(stem: Path) -> str:
    """The note of `stem`'s marker (see claim), "" when none."""
    text = _read_mark(marker(stem)) or ""
    return text[len(MARK_TEXT) :].rstrip("\n")


def owned(cache_dir: Path, listing: Listing | None = None) -> list[Path]:
    """The stems (`<cache_dir>/<name>-<key>`) whose marker proves their values are nsysql's. `listing`: the names
    in `cache_dir`, where the caller read them already (see Listing)."""
    if not cache_dir.is_dir():
        return []
    marks = cache_dir.glob(f"*{MARK}") if listing is None else listing.ending(MARK)
    return sorted(m.with_name(m.name[: -len(MARK)]) for m in marks if _marks(m))


def values(stem: Path, listing: Listing | None = None) -> list[Path]:
    """What the store may hold under `stem` (see the module's docstring), as far as it is there: a report's export
    folder, the tables and their DuckDB log, the answers' folder, the per-rank frames, and the temporary files of
    any of them. `listing`: the names in the stem's directory, read once for every stem of a trim, `size` or
    `cache info` (Listing); else read here."""
    if listing is not None:
        return listing.values(stem)
    d, name = stem.parent, stem.name
    parts = (f"{stem}{EXPORT}", f"{stem}.duckdb", f"{stem}.duckdb.wal", f"{stem}.results")
    found = [Path(p) for p in parts if _there(Path(p))]
    found += sorted(d.glob(f"{name}.*.parquet"))  # the name holds only letters, digits and ._- (`stem`)
    found += sorted(p for p in d.glob(f".{name}.*") if _temp_pid(p) is not None)
    return found


_PARQUET = ".parquet"


class Listing:
    """The names in one directory, read once (one os.scandir), and what `values` finds among them for each stem:
    the same values, in the same order, as its globs there (`<name>.*.parquet`, `.<name>.*`). Shared by every stem
    of a trim, `size` or `cache info`, so that those read the directory once, not twice per stem (quadratic in
    the entries a user keeps: a trim follows every cold load).

    Each name is filed under every stem it could be a value of (one per `.` in it: a name may hold `.`, so
    `a-K.b-L.t.parquet` is a frame of `a-K` and of `a-K.b-L` alike, as the globs have it), so that a stem's
    values are looked up, not searched for. Names are compared as the globs compare them: case-folded where the
    file system is (os.path.normcase). A name that appears or goes after the listing is not in it: a caller that
    must see the directory as it is now (a running load's temporary files) calls `values` without one."""

    def __init__(self, directory: Path):
        self.dir = directory
        try:
            with os.scandir(directory) as it:
                names = [e.name for e in it]
        except (FileNotFoundError, NotADirectoryError, PermissionError):  # as a glob there: nothing listed
            names = []
        self._names = names
        self._keys = {os.path.normcase(n) for n in names}
        self._frames: dict[str, list[str]] = {}
        self._temps: dict[str, list[str]] = {}
        for n in names:
            k = os.path.normcase(n)
            if k.endswith(_PARQUET):  # `<name>.<anything>.parquet`: a `.` at i, then at least `.parquet`
                for i in _dots(k, 1, len(k) - len(_PARQUET)):
                    self._frames.setdefault(k[:i], []).append(n)
            if k.startswith(".") and _pid_of(n) is not None:  # `.<name>.<anything>`, a temporary file
                for i in _dots(k, 2, len(k)):
                    self._temps.setdefault(k[1:i], []).append(n)

    def ending(self, suffix: str) -> list[Path]:
        """The files that a glob `*<suffix>` of the directory finds."""
        suffix = os.path.normcase(suffix)
        return [self.dir / n for n in self._names if os.path.normcase(n).endswith(suffix)]

    def values(self, stem: Path) -> list[Path]:
        """`values(stem)`, from this listing of the stem's directory."""
        assert stem.parent == self.dir, (stem, self.dir)  # else another directory's values, silently none
        parts = (EXPORT, ".duckdb", ".duckdb.wal", ".results")
        found = [Path(f"{stem}{p}") for p in parts if os.path.normcase(f"{stem.name}{p}") in self._keys]
        found += sorted(self.dir / n for n in self._frames.get(os.path.normcase(stem.name), ()))
        return found + self.temps(stem)

    def temps(self, stem: Path) -> list[Path]:
        """The temporary files of `stem`'s values (`.<name>.*`), sorted."""
        return sorted(self.dir / n for n in self._temps.get(os.path.normcase(stem.name), ()))


def _dots(name: str, start: int, end: int):
    """The positions of `.` in name[start:end]."""
    i = name.find(".", start, end)
    while i != -1:
        yield i
        i = name.find(".", i + 1, end)


def _there(p: Path) -> bool:
    return os.path.lexists(p)


def output(final: str | os.PathLike, fill: Callable[[Path], object], links: bool = True) -> None:
    """Write a file for the user (an `-o` file, a report, a trace, a table) whole or not at all: `fill(path)`
    writes it into a temporary file beside `final`, which is renamed over `final` once whole and flushed (with the
    permissions of the file it replaces). A failed write (a full disk, a file-size limit, Ctrl-C) leaves the file
    that was there as it was, and no temporary file; the error is an NsysqlError naming `final`.

    A symbolic link at `final` is followed (the file it names is replaced; the link stays) when `links`, else
    refused: nsysql writes through no link in a folder it fills (`profile --out`, `export --to`). A `final` that
    is not a regular file (a pipe, /dev/stdout, a terminal) is written as it is, in place: there is nothing to
    keep and no rename is possible."""
    import stat

    from ..errors import NsysqlError

    shown = str(final)
    p = Path(final)
    if p.is_symlink():
        if not links:
            raise NsysqlError(f"{shown}: is a symbolic link; nsysql does not write through links (remove it)")
        try:
            target = p.stat()
        except OSError:
            target = None
        # a link to a file (or to none yet) is followed to the file it names, which is replaced; a link to a pipe
        # or a terminal (/dev/stdout -> /proc/self/fd/1) is written through as it is: the path realpath gives
        # for a pipe (/proc/PID/fd/pipe:[N]) names nothing that can be opened
        if target is None or stat.S_ISREG(target.st_mode):
            p = Path(os.path.realpath(p))
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise NsysqlError(f"cannot write {shown} ({why(e)})") from None

    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise NsysqlError(f"cannot write {shown} (it is a directory)")
        try:
            fill(p)
        except OSError as e:
            raise NsysqlError(f"cannot write {shown} ({why(e)})") from None
        return

    def filled(tmp: Path) -> None:
        fill(tmp)
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))

    try:
        write(p, filled)
    except OSError as e:
        kept = "the file there is left as it was" if st is not None else "nothing written"
        raise NsysqlError(f"cannot write {shown} ({why(e)}; {kept})") from None


def output_text(final: str | os.PathLike, text: str, links: bool = True) -> None:
    """`output` of `text` as UTF-8."""
    output(final, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), links=links)


def write(final: Path, fill: Callable[[Path], object], durable: bool = True) -> None:
    """Atomically write `final`: `fill(path)` writes the content to a temporary file, then `commit` (`durable`
    as there). The temporary file is removed if anything fails; the error is the caller's (see `failed`)."""
    tmp = temp_path(final)
    try:
        fill(tmp)
        commit(tmp, final, durable)
    finally:
        remove(tmp)


def parquet(df) -> Callable[[Path], None]:
    """A `fill` for `write` that writes the polars frame `df` as Parquet, failing with the OSError the file's
    writes met (a full disk, a file-size limit): polars reports some of those as a ComputeError that no longer
    names the OS's reason ("Invalid thrift: transport error" when the footer is cut short), which `failed`
    would print as the warning's reason."""

    def fill(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            sink = _Sink(f)
            try:
                df.write_parquet(sink)
            except Exception:
                if sink.error is not None:
                    raise sink.error from None
                raise

    return fill


class _Sink(io.RawIOBase):
    """The file `f` as polars writes it, keeping the OSError of a failed write (see `parquet`)."""

    def __init__(self, f):
        super().__init__()
        self.f, self.error = f, None

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        try:
            return self.f.write(b)
        except OSError as e:
            self.error = e
            raise


def temps(cache_dir: Path, listing: Listing | None = None) -> list[Path]:
    """Temporary files of the store in `cache_dir` (and DuckDB's `.wal` beside one), of values whose marker is
    there (`owned`): being written by a process that runs, or left by one that was killed (`abandoned`). A file
    of the same pattern without a marker is not nsysql's to count or delete. `listing`: as `values`."""
    listing = listing or Listing(cache_dir)
    found = []
    for stem in owned(cache_dir, listing):
        found += listing.temps(stem)
        found += [p for p in cache_dir.glob(f"{stem.name}.results/*/*") if _temp_pid(p) is not None]
    return sorted(found)


def abandoned(temp: Path) -> bool:
    """Whether the process that wrote the temporary file `temp` has ended (so no one will finish it). A
    process of another user counts as running; so does one of another machine sharing the directory with the
    same pid as one here (the file then stays until that pid is gone here too)."""
    pid = _temp_pid(temp)
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process
        return False
    return False


def _temp_pid(p: Path) -> int | None:
    """The process that writes the temporary file `p` (or its `.wal`), or None if `p` is not one."""
    return _pid_of(p.name)


def _pid_of(name: str) -> int | None:
    name = name.removesuffix(".wal")
    if not name.endswith(TEMP_SUFFIX):
        return None
    parts = name.split(".")
    if len(parts) >= 4 and len(parts[-2]) == 8 and parts[-3].isdigit():  # <pid>.<random>.tmp (temp_path)
        return int(parts[-3])
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None  # <pid>.tmp (before it)


_warned: set[str] = set()


def failed(e: BaseException, cache_dir: Path) -> None:
    """The store could not write in `cache_dir`: say so once per process and directory, as a
    CacheWarning (the CLI prints it as one line, however many steps fail after it); the caller answers from
    memory."""
    warn(f"cache disabled ({why(e)} in {cache_dir}); answering without it", key=str(cache_dir))


def warn(message: str, key: str | None = None) -> None:
    """Warn `message` as a CacheWarning, unless this process did already (for `key`, default the message)."""
    key = key or message
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, CacheWarning, stacklevel=3)


def why(e: BaseException) -> str:
    """The reason in a few words: the OS's, where DuckDB or polars quote it within their own message."""
    import errno

    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    text = str(e)
    for code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.ENOTDIR, errno.EIO):
        if os.strerror(code).lower() in text.lower():
            return os.strerror(code).lower()
    return (text.splitlines()[0] if text else type(e).__name__)[:80]


def remove(p: Path) -> bool:
    _own.discard(p)
    try:
        p.unlink()
        return True
    except OSError:
        return False
