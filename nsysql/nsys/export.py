"""A report (`.nsys-rep`, or `.qdrep` before 2021.4) exported to SQLite once, into its entry of the store."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ..errors import NsysqlError
from . import BLOBS, WHERE_LOOKED, _status, capture, export_command, find, last_line, shell, timeout_s


def sqlite_for(
    report: str | os.PathLike, cache_dir: str | os.PathLike | None = None, nsys: str | None = None, keep: bool = True
) -> Path:
    """The SQLite export of the report `report`, made once with `nsys export` into the report's entry of the
    store (store.export_path), beside the tables and answers made from it; an NsysqlError naming the exact `nsys
    export` command to run when no nsys is found, or when it fails.

    What nsys wrote is kept only once it opens as an nsys SQLite export (an nsys that exits 0 but leaves a
    truncated or garbage file must not become the report's export for every later command), after the entry's
    marker, which names the report (store.claim), the proof `cache clear` and `cache info` go by. `keep=False`
    (--no-cache), or a cache directory that cannot be written (said once, as a CacheWarning): the export goes
    into a private temporary folder instead (`temporary` says so), which the caller removes with
    `remove_temporary` once it has read it."""
    import tempfile

    from .. import store

    shown = str(report)
    p = Path(os.path.expanduser(shown))
    if not p.is_file():
        raise NsysqlError("no such file" if not p.exists() else "is not a file", shown)
    cache = store.directory(cache_dir)
    final = store.export_path(p, cache)
    stem = final.parent.with_suffix("")
    if keep and _kept_export(final):
        return final
    found = find(nsys)
    if found is None:
        raise _no_nsys(p, shown)
    tmp = _export_folder(p, final, cache) if keep else None
    if tmp is None:
        tmp = Path(tempfile.mkdtemp(prefix="nsysql-export-"))  # private (0700), removed by the caller
        _TEMPORARY.add(tmp)
    try:
        out = tmp / final.name
        _export(found.path, p, out, cache, shown)
        if tmp in _TEMPORARY:
            return out
        try:
            store.sync(out)  # whole on disk before its folder is renamed into place
            os.replace(tmp, final.parent)
        except OSError:  # another process put the same export in place meanwhile: read that one
            if not final.is_file():
                raise
        store.used(stem)
        return final
    except BaseException:
        remove_temporary(tmp / final.name)
        raise
    finally:
        if tmp not in _TEMPORARY:
            shutil.rmtree(tmp, ignore_errors=True)
            store.remove(tmp)  # no longer this process's to remove on Ctrl-C
            store.release(stem)  # no value after all (a failed export): no marker either


def _kept_export(final: Path) -> bool:
    """Whether the report's entry holds the export `final` and it opens as an nsys SQLite export (then marked
    used). One that does not, kept by an nsysql that did not check it, is removed with its folder, to be exported
    again."""
    from .. import store
    from ..loader.source import open_source

    if not final.is_file():
        return False
    try:
        open_source(final)
        store.used(final.parent.with_suffix(""))
        return True
    except NsysqlError:
        shutil.rmtree(final.parent, ignore_errors=True)
        return False


def _no_nsys(p: Path, shown: str) -> NsysqlError:
    """The error when no nsys is found to export the report `p`: the `nsys export` command to run instead,
    writing beside the report without overwriting (that file is theirs)."""
    cmd = shell(export_command("nsys", p, p.with_suffix(".sqlite"), force=False))
    return NsysqlError(
        f"is an Nsight Systems report and nsys was not found to export it (looked at {WHERE_LOOKED}); run "
        f"`{cmd}` and analyse that file, or name nsys with --nsys PATH or $NSYS",
        shown,
    )


def _export_folder(p: Path, final: Path, cache: Path) -> Path | None:
    """A temporary folder beside the export's final one (`.<stem>.export.<pid>.<random>.tmp`, store.temp_path),
    renamed into place once the export in it is whole, after the entry's marker naming the report (store.claim);
    None where the cache cannot be written (said once, as a CacheWarning: store.failed)."""
    from .. import store

    tmp, stem = store.temp_path(final.parent), final.parent.with_suffix("")
    try:
        store.claim(stem, note=str(p.resolve()))
        tmp.mkdir()
    except OSError as e:
        store.remove(tmp)
        store.release(stem)
        store.failed(e, cache)
        return None
    return tmp


def _export(nsys: str, p: Path, out: Path, cache: Path, shown: str) -> None:
    if sys.stderr.isatty():
        where = f"once: kept in {cache}" if out.parent not in _TEMPORARY else "not kept"
        print(f"nsysql: exporting {p.name} to SQLite with {nsys} ({where})", file=sys.stderr)
    export_to(nsys, p, out, shown)


def export_to(nsys: str, p: Path, out: Path, shown: str) -> list[str]:
    """Export the report `p` to `out` with `nsys export` (export_command: NVTX payloads included), under
    timeout_s(); the command that made it. An NsysqlError naming the command (about `shown`) when it does not
    finish, fails, or exits 0 without a file that opens as an nsys SQLite export. An nsys older than
    --include-blobs, which refuses it by name, exports without payloads, with a warning saying so."""
    from ..loader.source import open_source

    argv = export_command(nsys, p.resolve(), out)
    limit = timeout_s()
    code, output = capture(argv, limit)
    if code not in (0, None) and BLOBS.split("=")[0] in output.decode("utf-8", "replace"):
        argv = export_command(nsys, p.resolve(), out, blobs=False)
        code, output = capture(argv, limit)
        if code == 0:
            import warnings

            warnings.warn(
                f"{nsys} refuses {BLOBS} (an older nsys): exported without NVTX payloads (NCCL's, Python "
                "sampling's frames)",
                stacklevel=2,
            )
    why = last_line(output)
    if code is None:
        raise NsysqlError(
            f"`{shell(argv)}` did not finish in {limit:g} s and was stopped"
            + (f" (last said: {why})" if why else "")
            + "; set NSYSQL_NSYS_TIMEOUT to give it longer (seconds, 0: no limit)",
            shown,
        )
    if code != 0 or not out.is_file():
        raise NsysqlError(
            f"`{shell(argv)}` failed (exit status {_status(code)}" + (f": {why}" if why else "") + ")", shown
        )
    try:
        open_source(out)
    except NsysqlError as e:
        what = e.message
        raise NsysqlError(
            f"`{shell(argv)}` exited with status 0 but wrote no usable export: it {what}; not kept", shown
        ) from None
    return argv


_TEMPORARY: set[Path] = set()  # the private folders of exports not kept (sqlite_for)


def temporary(path: str | os.PathLike) -> bool:
    """Whether `path` is an export of sqlite_for in a private temporary folder (not kept)."""
    return Path(path).parent in _TEMPORARY


def remove_temporary(path: str | os.PathLike) -> None:
    """Remove the private temporary folder of the export `path` (see sqlite_for), if it is one."""
    d = Path(path).parent
    if d in _TEMPORARY:
        shutil.rmtree(d, ignore_errors=True)
        _TEMPORARY.discard(d)
