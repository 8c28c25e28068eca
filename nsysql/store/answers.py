"""Cached answers: the frames an analysis returned, stored beside the profile's cache entry.

Users re-run the same commands on the same file. An answer depends only on the export and nsysql's code (both
in the store's key, which names the entry: see nsysql.store) and on the call's parameters; so the frames are
stored as Parquet under `<entry>.results/<question>-<hash of its parameters>/`, each file written whole under
a temporary name and renamed into place (store.write; the index file last): editing nsysql never serves a stale
answer. A damaged or partial answer is recomputed; one that cannot be written (a full disk) gives the store's one
warning. So its files are not flushed to disk before their rename (`durable=False`): a crash that leaves one
short or empty costs its recomputation, where a flush of each of the two dozen files a cold `summary` stores
would cost every run. Within one Profile the answers are also kept in memory (`Answers`), with or without a
cache entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from pathlib import Path

from .. import store

INDEX = "index.json"


def _dir(entry: Path, name: str, params: dict) -> Path:
    blob = json.dumps({"name": name, "params": params}, sort_keys=True, default=str)
    return entry.with_name(entry.stem + ".results") / f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:20]}"


def get(entry: Path | None, name: str, params: dict):
    """The stored answer (a DataFrame or a dict of them), or None."""
    if entry is None:
        return None
    import polars as pl  # here: a printed answer (`printed`) is read without it

    d = _dir(entry, name, params)
    index = _index(d)
    if index is None:
        return None
    single, sections = index
    try:
        frames = {k: pl.read_parquet(d / f"{i}.parquet") for i, k in enumerate(sections)}
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return None  # missing or damaged: recomputed and rewritten
    return frames[""] if single else frames


def _index(d: Path) -> tuple[bool, list[str]] | None:
    """The answer in `d` as its index.json says it (single frame or not, its sections), or None where there is
    none in place: missing, damaged or of another shape (valid JSON, not our index)."""
    try:
        index = json.loads((d / INDEX).read_text())
        single, sections = index["single"], index["sections"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not (
        sections == [""]
        if single is True
        else single is False
        and isinstance(sections, list)
        and sections
        and all(isinstance(k, str) and k for k in sections)
    ):
        return None
    return single, sections


def put(entry: Path | None, name: str, params: dict, result) -> None:
    if entry is None:
        return
    import polars as pl

    single = isinstance(result, pl.DataFrame)
    frames = {"": result} if single else result
    d = _dir(entry, name, params)
    index = json.dumps({"sections": list(frames), "single": single})
    try:
        store.claim(entry.with_suffix(""))  # what `cache clear` may remove (the entry's build wrote it first)
        d.mkdir(parents=True, exist_ok=True)
        for i, df in enumerate(frames.values()):
            store.write(d / f"{i}.parquet", store.parquet(df), durable=False)
        store.write(d / INDEX, lambda p: p.write_text(index), durable=False)
    except FileNotFoundError:
        pass  # `nsysql cache clear` from another process removed the directory meanwhile: store nothing
    except (OSError, pl.exceptions.PolarsError) as e:  # a full disk: answered anyway, recomputed next time
        store.failed(e, entry.parent)


def printed(entry: Path, name: str, params: dict, look: dict) -> str | None:
    """The text printed of the stored answer `name(**params)` as `look` (a front end's rendering switches: format,
    width, unit, ...) says, kept by `keep_printed`, or None."""
    d = _dir(entry, name, params)
    if _index(d) is None:  # only while the answer itself is in place (a damaged one is recomputed, its text too)
        return None
    try:
        got = json.loads((d / _printed_name(look)).read_text(encoding="ascii"))
        if got["look"] == json.loads(json.dumps(look)) and isinstance(got["text"], str):
            return got["text"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not kept yet, or damaged: rendered again from the answer, and kept again
    return None


def keep_printed(entry: Path, name: str, params: dict, look: dict, text: str) -> None:
    """Keep the text printed of `name(**params)` as `look` says, beside the answer (only where the answer itself
    is stored: `cache clear` and the size cap remove them together)."""
    d = _dir(entry, name, params)
    blob = json.dumps({"look": look, "text": text})  # ASCII, every character escaped: read back exactly
    try:
        if _index(d) is not None:
            store.write(d / _printed_name(look), lambda p: p.write_text(blob, encoding="ascii"), durable=False)
    except FileNotFoundError:
        pass  # `nsysql cache clear` from another process removed the directory meanwhile
    except OSError as e:  # a full disk: printed anyway, rendered again next time
        store.failed(e, entry.parent)


def _printed_name(look: dict) -> str:
    blob = json.dumps(look, sort_keys=True)
    return f"printed-{hashlib.sha256(blob.encode()).hexdigest()[:20]}.json"


class Answers:
    """A Profile's answers: in memory, and stored beside its cache entry `entry` (None: in memory only). Shared
    with its workers (Profile.worker): each question is computed once, however many threads ask it at once."""

    def __init__(self, entry: Path | None = None):
        self.entry = entry
        self.frames: dict = {}
        self.kept: dict = {}  # what `once` computed
        self._locks: dict = {}
        self._guard = threading.Lock()

    def ask(self, name: str, params: dict, compute):
        """The answer to `name(**params)`: remembered, else stored, else `compute()` (then remembered and
        stored). `params`: every parameter of the question, defaults included."""
        key = _key(name, params)
        if key not in self.frames:
            with self._lock(key):  # a worker asking the same question meanwhile waits for this answer
                if key not in self.frames:
                    hit = get(self.entry, name, params)
                    if hit is None:
                        hit = compute()
                        put(self.entry, name, params, hit)
                    self.frames[key] = hit
        return _copy(self.frames[key])

    def once(self, key, compute):
        """`compute()` once for `key` among these answers, kept in memory only: for what is not frames (the
        iteration range found, Profile._detect). An error is raised to each asker, and not kept."""
        if key not in self.kept:
            with self._lock(("once", key)):
                if key not in self.kept:
                    self.kept[key] = compute()
        return self.kept[key]

    def _lock(self, key) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(key, threading.RLock())


def cached(name: str, normalize: dict | None = None):
    """Decorator for Profile methods: serve the stored answer for these arguments, else compute and store it,
    through the Profile's `answers`. `normalize`: parameter -> function giving its canonical value, which both
    the key and the method get, so that spellings of one question share an answer (`gaps(min_ns="1ms")` from
    the CLI and `gaps(min_ns=1_000_000)` from summary)."""

    def wrap(method):
        @functools.wraps(method)
        def inner(self, *args, **kwargs):
            import inspect

            self.check_open()  # no answers from a closed Profile, remembered or not
            bound = inspect.signature(method).bind(self, *args, **kwargs)
            bound.apply_defaults()
            for k, f in (normalize or {}).items():
                bound.arguments[k] = f(bound.arguments[k])
            params = {k: v for k, v in bound.arguments.items() if k != "self"}
            return self.answers.ask(name, params, lambda: method(*bound.args, **bound.kwargs))

        return inner

    return wrap


def _key(name: str, params: dict) -> tuple[str, str]:
    """An answer's key among a Profile's answers: the question and its parameters, defaults included."""
    return name, json.dumps(params, sort_keys=True, default=str)


def _copy(result):
    """The caller's own copy (a polars clone shares the data; it only guards in-place edits like insert_column)."""
    if isinstance(result, dict):
        return {k: v.clone() for k, v in result.items()}
    return result.clone()
