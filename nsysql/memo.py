"""Cached answers: the frames an analysis returned, stored beside the profile's cache entry.

Users re-run the same commands on the same file. An answer depends only on the export (already covered by the
cache entry's key), the call's parameters, and the analysis code; so the frames are stored as Parquet under
`<entry>.results/`, keyed by a hash of the analysis name, its parameters and the text of nsysql's analysis code
(queries/v1/analyses/*.sql and nsysql/analyses/*.py): editing an analysis never serves a stale answer.
Writing is best effort (temporary names, then rename; the index file last); a damaged or partial answer is
recomputed. Within one Profile the answers are also kept in memory, with or without a cache entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from pathlib import Path

import polars as pl

from .queries import queries_dir

INDEX = "index.json"


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    h = hashlib.sha256()
    roots = [queries_dir() / "analyses", Path(__file__).resolve().parent / "analyses"]
    for root in roots:
        for f in sorted(root.glob("*.*")):
            if f.suffix in (".sql", ".py"):
                h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _dir(entry: Path, name: str, params: dict) -> Path:
    blob = json.dumps({"name": name, "params": params, "code": code_hash()}, sort_keys=True, default=str)
    return entry.with_name(entry.stem + ".results") / f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:20]}"


def get(entry: Path | None, name: str, params: dict):
    """The stored answer (a DataFrame or a dict of them), or None."""
    if entry is None:
        return None
    d = _dir(entry, name, params)
    try:
        index = json.loads((d / INDEX).read_text())
        single, sections = index["single"], index["sections"]
        if not (sections == [""] if single is True else single is False and isinstance(sections, list)
                and sections and all(isinstance(k, str) and k for k in sections)):
            return None
        frames = {k: pl.read_parquet(d / f"{i}.parquet") for i, k in enumerate(sections)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, pl.exceptions.PolarsError):
        return None  # missing, damaged or of another shape (valid JSON, not our index): recomputed and rewritten
    return frames[""] if single else frames


def put(entry: Path | None, name: str, params: dict, result) -> None:
    if entry is None:
        return
    single = isinstance(result, pl.DataFrame)
    frames = {"": result} if single else result
    d = _dir(entry, name, params)
    tag = f".{os.getpid()}.tmp"
    try:
        d.mkdir(parents=True, exist_ok=True)
        for i, df in enumerate(frames.values()):
            tmp = d / f"{i}.parquet{tag}"
            df.write_parquet(tmp)
            os.replace(tmp, d / f"{i}.parquet")
        tmp = d / (INDEX + tag)
        tmp.write_text(json.dumps({"sections": list(frames), "single": single}))
        os.replace(tmp, d / INDEX)
    except (OSError, pl.exceptions.PolarsError):
        pass  # an answer we cannot store is only recomputed next time


class Answers:
    """A Profile's answers in memory, shared with its workers (Profile.worker): each question is computed once,
    however many threads ask it at the same time."""

    def __init__(self):
        self.frames: dict = {}
        self.detected: dict = {}  # iteration ranges found (Profile._detect), by --range
        self._locks: dict = {}
        self._guard = threading.Lock()

    def lock(self, key) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(key, threading.RLock())


def cached(name: str, normalize: dict | None = None):
    """Decorator for Profile methods: serve the stored answer for these arguments, else compute and store it.
    `normalize`: parameter -> function giving its canonical value, which both the key and the method get, so
    that spellings of one question share an answer (`gaps(min_ns="1ms")` from the CLI and
    `gaps(min_ns=1_000_000)` from summary)."""

    def wrap(method):
        @functools.wraps(method)
        def inner(self, *args, **kwargs):
            import inspect

            if self._closed:  # no answers from a closed Profile, remembered or not
                self.con  # raises NsysqlError

            bound = inspect.signature(method).bind(self, *args, **kwargs)
            bound.apply_defaults()
            for k, f in (normalize or {}).items():
                bound.arguments[k] = f(bound.arguments[k])
            params = {k: v for k, v in bound.arguments.items() if k != "self"}
            # this Profile's own answers first (also without a cache entry: summary asks iterations twice)
            answers = self._answers
            key = _key(name, params)
            if key in answers.frames:
                return _copy(answers.frames[key])
            with answers.lock(key):  # a worker asking the same question meanwhile waits for this answer
                if key not in answers.frames:
                    hit = get(self.cache_entry, name, params)
                    if hit is None:
                        hit = method(*bound.args, **bound.kwargs)
                        put(self.cache_entry, name, params, hit)
                    answers.frames[key] = hit
            return _copy(answers.frames[key])

        return inner

    return wrap


def peek(profile, name: str, params: dict):
    """The answer `cached(name)` would serve for `params` without computing it (from this Profile's answers or
    its cache entry), or None. `params`: every parameter of the method, defaults included."""
    key = _key(name, params)
    frames = profile._answers.frames
    if key not in frames:
        hit = get(profile.cache_entry, name, params)
        if hit is None:
            return None
        frames[key] = hit
    return _copy(frames[key])


def asked(profile, name: str, params: dict) -> bool:
    """Whether `cached(name)` was asked for `params` on this Profile or one of its workers (so the answer is in
    memory, or being computed by another worker: asking it again waits for that one)."""
    key = _key(name, params)
    with profile._answers._guard:
        return key in profile._answers._locks


def _key(name: str, params: dict) -> tuple[str, str]:
    """An answer's key among a Profile's answers: the question and its parameters, defaults included."""
    return name, json.dumps(params, sort_keys=True, default=str)


def _copy(result):
    """The caller's own copy (a polars clone shares the data; it only guards in-place edits like insert_column)."""
    if isinstance(result, dict):
        return {k: v.clone() for k, v in result.items()}
    return result.clone()
