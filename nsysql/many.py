"""Several per-rank exports at once: `nsysql.load_many(paths) -> Ranks`.

Engine: each export is loaded where it is (a local process pool of half the cores, in this process where that is one
worker, or Dask workers that
share the files' filesystem), into the cache, and reduced there to the small per-rank frames of
`nsysql.analyses.ranks.rank_tables`, which are stored too (Parquet beside the cache entry, under the store's
key: nsysql.store); only those frames travel back. The cross-rank analysis then runs in one in-memory DuckDB
over all ranks' frames. A warm run reads the cached frames directly and starts no worker.
"""

from __future__ import annotations

import gc
import glob
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import polars as pl

from . import store
from .analyses import ranks as _ranks
from .analyses._names import some_of
from .engine import Flag, Param, entry_point
from .errors import NsysqlError, one_line
from .store import ranks as _stored

# where the loads run: load_many's parameters that `nsysql ranks` takes as options (nsysql.cli.declared)
entry_point(
    "load_many",
    params=(
        Param(
            "dask",
            (str, type(None)),
            None,
            doc="Run the per-file loads on a Dask cluster (tcp://host:8786); needs pip install 'nsysql[dask]'.",
            flag=Flag(metavar="ADDRESS"),
        ),
        Param(
            "workers",
            (int, type(None)),
            None,
            doc="Local processes for the loads [default: half the cores; 1: in this process].",
            flag=Flag(minimum=1),
        ),
        Param(
            "range",
            (str, type(None)),
            None,
            doc="The iteration range of every rank (exact name, numbered family, prefix or regex; '' for the ranges "
            "without a name); detected in each when left out.",
            flag=Flag(metavar="PATTERN"),
        ),
    ),
)


def is_glob(path: str) -> bool:
    """Whether nsysql expands `path` as a glob: it has a wildcard and names no file as it is (a file may be
    called `run[1].sqlite` or `what?.sqlite`; an existing path is always that path)."""
    return any(c in path for c in "*?[") and not os.path.lexists(os.path.expanduser(path))


def _named(paths: list[str]) -> dict[str, list[str]]:
    """Each file `paths` name (globs expanded), by its real path (one file named two ways, `rank0.sqlite` and
    `./rank0.sqlite`, is one file), with the names it was given, in the order first named."""
    out: dict[str, list[str]] = {}
    for p in paths:
        hits = sorted(glob.glob(os.path.expanduser(p))) if is_glob(p) else [p]
        if not hits:
            raise NsysqlError(f"{p}: no file matches")
        for h in hits:
            out.setdefault(os.path.realpath(os.path.expanduser(h)), []).append(h)
    return out


def expand(paths: list[str]) -> list[str]:
    """Paths and globs ('runs/rank*.sqlite') -> existing paths, in the order given, without repeats."""
    return [names[0] for names in _named(paths).values()]


def named_again(paths: list[str]) -> str:
    """Where `paths` (globs expanded) name one file more than once (`rank0.sqlite` and `./rank0.sqlite`, or two
    globs that match it), the clause that says so: expand reads it once, as one rank. Empty otherwise."""
    again = [f"{names[0]} ({len(names)} times)" for names in _named(paths).values() if len(names) > 1]
    return f"; named more than once, read once: {some_of(again)}" if again else ""


def _job(
    path: str, cache_dir: str | None, cache: bool, cache_max: str | int | None = None, range: str | None = None
) -> tuple[str, dict[str, pl.DataFrame], list[str]]:
    """Load one rank and reduce it (its loop: `range`, else the one detected); with the store's warnings (a full
    cache disk), which the caller repeats: a worker process's own would reach stderr once per worker, and not in
    the CLI's one-line form."""
    import warnings

    from ._load import load

    if cache:
        hit = _stored.get(path, cache_dir, range)
        if hit is not None:
            return path, hit, []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", store.CacheWarning)
        prof = load(path, cache=cache, cache_dir=cache_dir, cache_max=cache_max)
        tables = prof._rank_tables(range=range)  # declared: nsysql.analyses.catalog
        prof.close()
        if cache and prof.cache_entry is not None:
            _stored.put(path, cache_dir, tables, range)
    return path, tables, [str(w.message) for w in caught if issubclass(w.category, store.CacheWarning)]


class Ranks:
    """The per-rank frames of several exports and the cross-rank answers, as polars DataFrames."""

    rule: str = _ranks.RULE  # the straggler rule in words, said with every answer (nsysql.analyses.ranks)

    def __init__(self, tables: dict[str, pl.DataFrame], numbering: str):
        self.tables = tables
        self.numbering = numbering
        self._reduced: dict[str, pl.DataFrame] | None = None

    @property
    def said(self) -> str:
        """How many ranks, and where their numbers came from: `nsysql ranks`' first line on stderr; where the
        ranks' loops differ in length (files of different runs, or captures cut at different points), from the
        fewest iterations to the most: past the shortest loop, an iteration compares fewer ranks."""
        n = self.tables["info"].height
        said = f"{n} rank{'s' if n != 1 else ''}; {self.numbering}"
        try:
            its = self.per_rank().filter(pl.col("iterations") > 0).sort("iterations", "rank")
        except NsysqlError:  # no rank has a loop: the answer's refusal says so
            return said
        if its.height > 1 and its["iterations"][0] != its["iterations"][-1]:
            (lo, lo_rank), (hi, hi_rank) = (its.select("iterations", "rank").row(i) for i in (0, -1))
            said += (
                f"; the ranks' loops differ in length, from {lo:,} iterations (rank {lo_rank}) to {hi:,} (rank "
                f"{hi_rank}): an iteration past {lo:,} compares fewer ranks"
            )
        return said

    def _reduce(self) -> dict[str, pl.DataFrame]:
        if self._reduced is None:
            from . import duck

            con = duck.connect(":memory:", files=[])  # the frames are registered: no file to read
            self._reduced = _ranks.reduce(con, self.tables)
            con.close()
        return self._reduced

    @property
    def files(self) -> pl.DataFrame:
        """rank, path, where the rank number came from, nsys version."""
        return self.tables["info"].sort("rank")

    def per_rank(self) -> pl.DataFrame:
        """Per rank: steady-state iteration time (mean, median), GPU busy %, idle, collective time, top cause."""
        return self._reduce()["ranks"]

    def by_iteration(self) -> pl.DataFrame:
        """Per iteration: the rank that reached the collectives last (the others waited for it) and how long they
        waited; and the rank with the longest step on the CPU clock (which may be one that waited)."""
        return self._reduce()["iterations"]

    def stragglers(self) -> pl.DataFrame:
        """(rank, iteration) pairs that made others wait, with the evidence."""
        return self._reduce()["stragglers"]

    def findings(self) -> pl.DataFrame:
        return _ranks.straggler_sentences(self.stragglers(), self.tables)

    def iterations(self) -> pl.DataFrame:
        """Every rank's iterations, with a `rank` column."""
        return self.tables["iterations"].sort(["rank", "iteration"])

    def shown(self) -> dict[str, pl.DataFrame]:
        """What `nsysql ranks` shows: the files (rank, path, where its number came from, and what is wrong with a
        file where one is), per rank, the stragglers in words and their evidence, and per iteration the rank the
        others waited for."""
        files = self.files
        return {
            "files": files.select("rank", "path", "rank_source", *(["problem"] if "problem" in files.columns else [])),
            "per rank": self.per_rank(),
            "stragglers": self.findings().select("rank", "sentence"),
            "straggler evidence": self.stragglers(),
            "per iteration: the rank the others waited for": self.by_iteration(),
        }


def load_many(
    paths: list[str] | str,
    *,
    cache_dir: str | os.PathLike | None = None,
    cache: bool = True,
    workers: int | None = None,
    client=None,
    cache_max: str | int | None = None,
    dask: str | None = None,
    range: str | None = None,
) -> Ranks:
    """Load several per-rank exports in parallel (processes, or a dask.distributed.Client) into a Ranks;
    `dask`: the address of a Dask scheduler (tcp://host:8786) to connect a client to for these loads; `range`:
    the iteration range of every rank (as Profile.iterations takes it), else the loop each rank's own detection
    finds."""
    if dask is not None and client is None:
        own = connect_dask(dask)
        try:
            return load_many(
                paths, cache_dir=cache_dir, cache=cache, workers=workers, client=own, cache_max=cache_max, range=range
            )
        finally:
            own.close()
    if isinstance(paths, (str, os.PathLike)):  # one path or glob, not a list of its characters
        paths = [paths]
    files = expand([str(p) for p in paths])
    if not files:
        raise NsysqlError("no files given")
    cdir = str(cache_dir) if cache_dir else None
    # warm: ranks whose frames are cached are read here, without starting workers
    results = [(f, hit, []) for f in files if cache and (hit := _stored.get(f, cdir, range)) is not None]
    todo = [f for f in files if f not in {r[0] for r in results}]
    if todo and client is not None:
        futures = client.map(_job, todo, cache_dir=cdir, cache=cache, cache_max=cache_max, range=range, pure=False)
        results += client.gather(futures)
    elif (n := min(len(todo), workers or pool_size(os.cpu_count() or 1))) <= 1:
        results += [_job(f, cdir, cache, cache_max, range) for f in todo]
    else:
        k = len(todo)
        # spawn, not fork: a forked child can inherit a DuckDB or Arrow lock held by another thread
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            results += list(pool.map(_job, todo, [cdir] * k, [cache] * k, [cache_max] * k, [range] * k))
    for said in dict.fromkeys(w for r in results for w in r[2]):  # each once, in order
        store.warn(said)
    by_path = {r[0]: r[1] for r in results}
    infos = [by_path[f]["info"].row(0, named=True) for f in files]
    numbers, why = _ranks.number_ranks(infos)
    why += named_again([str(p) for p in paths])
    said = dict(zip(files, _ranks.rank_sources(infos, numbers)))
    parts = [{**by_path[f], "info": by_path[f]["info"].with_columns(rank_source=pl.lit(said[f]))} for f in files]
    tables = _ranks.combine(list(zip(numbers, parts)))
    return Ranks(tables, why)


def pool_size(cpus: int) -> int:
    """The worker processes load_many loads exports in where it is not told (1: in this process): half the
    cores, since one load keeps about two busy (its readers, then DuckDB's threads). Measured (BENCHMARKS.md,
    "Many ranks"): on 2 cores a pool of 2 is slower than loading in turn, for 2 exports of 1 MiB to 75 MiB; on 16
    cores 8 workers load 8 exports of 75 MiB 3x faster than one process, and 16 no faster than 8."""
    return max(1, cpus // 2)


def number(profiles: list, given: list[str] | None = None) -> tuple[list[int], str]:
    """Rank numbers of loaded exports as load_many numbers them (RANK in each file, else sorted file names),
    and the sentence saying how many files there are and where their numbers came from (what a command over
    several FILEs says first on stderr); `given`: the paths and globs they came from (named_again)."""
    numbers, why = _ranks.number_ranks([_ranks.rank_info(str(p.path), p.facts) for p in profiles])
    return numbers, f"{len(profiles)} files; {why}{named_again(given or [])}"


def stack(profiles: list, ranks: list[int], method: str, **kwargs) -> pl.DataFrame:
    """`Profile.<method>(**kwargs)` of each loaded export, stacked with a leading `rank` column. An export the
    question does not apply to is named alone in the error, not with the others."""
    frames = [
        _asked(p, method, kwargs).with_columns(pl.lit(r, pl.Int64).alias("rank")) for p, r in zip(profiles, ranks)
    ]
    out = pl.concat(frames, how="diagonal_relaxed")
    return out.select("rank", *[c for c in out.columns if c != "rank"]).sort("rank", maintain_order=True)


def shown_each(
    profiles: list, ranks: list[int], method: str, kwargs: dict, table: str = "table"
) -> list[tuple[int, dict]]:
    """`Profile.<method>(**kwargs)` of each export, a `*_shown` answer (its frame `table` and what is said with
    it), that frame given a `rank` column as stack gives it: (rank, answer) per export, an error naming its
    export."""
    out = []
    for p, r in zip(profiles, ranks):
        got = _asked(p, method, kwargs)
        out.append((r, {**got, table: got[table].with_columns(pl.lit(r, pl.Int64).alias("rank"))}))
    return out


def _asked(prof, method: str, kwargs: dict) -> pl.DataFrame:
    try:
        return getattr(prof, method)(**kwargs)
    except NsysqlError as e:
        if e.path or str(prof.path) in str(e):
            raise
        raise NsysqlError(str(e), path=str(prof.path), option=e.options) from None


def collectives(
    paths: list[str] | str,
    *,
    by: str = "size",
    range: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    cache: bool = True,
) -> dict[str, pl.DataFrame | str]:
    """`nsysql collectives FILE...` in Python: the NCCL collectives of several per-rank exports (paths or globs),
    ranks numbered as load_many numbers them, the answer of collectives_across; one path (not a glob), as
    `nsysql collectives FILE` answers it: that export's collectives_shown (`by="rank"` needs several)."""
    from ._load import load

    if isinstance(paths, (str, os.PathLike)):  # one path or glob, not a list of its characters
        paths = [paths]
    if len(paths) == 1 and not is_glob(str(paths[0])):  # one export: no ranks to match its calls with
        if by == "rank":
            raise NsysqlError("`by=rank` needs several exports, one per rank", option="by")
        prof = load(str(paths[0]), cache=cache, cache_dir=cache_dir)
        try:
            return prof.collectives_shown(by=by, range=range)
        finally:
            prof.close()
    files = expand([str(p) for p in paths])
    if not files:
        raise NsysqlError("no files given")
    profiles: list = []
    try:
        for f in files:
            profiles.append(load(f, cache=cache, cache_dir=cache_dir))
        return collectives_across(profiles, number(profiles)[0], by, range)
    finally:
        for prof in profiles:
            prof.close()


def collectives_across(
    profiles: list, ranks: list[int], by: str = "size", range: str | None = None
) -> dict[str, pl.DataFrame | str]:
    """`nsysql collectives` over several loaded exports (one per rank), with `said`, the lines printed under the
    table. Where the NCCL calls carry their message sizes: `collectives` by `by` with a rank column (`rank`: per
    rank, with the collective instances each arrived last at), `skew`, one row per collective instance across
    them, `skew_by_rank` (nsysql.analyses.collectives.skew) and `said`, the skew in one line. Where they carry
    none (no NVTX payloads), by size or kind: each export answered as one file is (the calls and GPU time per
    kind from the NCCL kernels' names) stacked with a `rank` column, `note` (rank, why it has no size) and `said`,
    one line per rank naming its file. Refused (NsysqlError) where some exports have sizes and others not (the
    answers would not compare), and, without sizes, for a `by` that matches calls across ranks."""
    from .analyses import collectives as _coll

    unsized = _unsized(profiles, ranks, by, range)
    if unsized is not None:
        return unsized
    calls = stack(profiles, ranks, "collectives", by="call", range=range)
    inst = _coll.skew(calls)
    if by == "rank":
        table = _coll.grouped(calls, "rank").join(_coll.skew_by_rank(inst), on="rank", how="left")
    else:
        table = calls if by == "call" else stack(profiles, ranks, "collectives", by=by, range=range)
    held = _coll.skew_by_rank(inst)
    return {"collectives": table, "skew": inst, "skew_by_rank": held, "said": _coll.skew_sentence(inst, held)}


def _unsized(profiles: list, ranks: list[int], by: str, range: str | None) -> dict | None:
    """collectives_across where the exports' NCCL calls carry no message size; None where every one has sizes.
    Whether each has them is asked alone (collectives_unsized, one query): a rank's whole answer is made only
    where it is the one shown, never to learn that it has sizes."""
    whys = sorted((r, _asked(p, "collectives_unsized", {})) for p, r in zip(profiles, ranks))
    unsized = [r for r, why in whys if why]
    if not unsized:
        return None
    paths = {r: str(p.path) for p, r in zip(profiles, ranks)}  # a refusal names each file whole (names may repeat)
    lacking = ", ".join(f"rank {r} ({paths[r]})" for r in unsized)
    why = dict(whys)[unsized[0]]
    if by not in ("size", "kind"):  # calls matched across ranks need each call's size: none to match here
        raise NsysqlError(
            f"`by={by}` needs NCCL's NVTX payloads (each call's size and communicator), which {lacking} "
            f"lack{'s' if len(unsized) == 1 else ''}: {why}; `by=kind` gives each rank's calls and GPU time per kind "
            "from the NCCL kernels' names",
            option="by",
        )
    if len(unsized) < len(whys):
        sized = ", ".join(f"rank {r} ({paths[r]})" for r, w in whys if not w)
        raise NsysqlError(
            f"message sizes are in {sized} but not in {lacking} ({why}): the answers would not compare; give "
            "exports that all have NCCL's NVTX payloads, or each file alone"
        )
    asked = {"by": by, "range": range}
    got = sorted(shown_each(profiles, ranks, "collectives_shown", asked, table="collectives"), key=lambda rg: rg[0])
    notes = [(r, g["note"]["note"][0]) for r, g in got if "note" in g]
    return {
        "collectives": _stacked(got, "collectives"),
        "note": pl.DataFrame({"rank": [r for r, _ in notes], "note": [n for _, n in notes]}),
        "said": _each_said(profiles, ranks, notes),
    }


def kernels_across(profiles: list, ranks: list[int], params: dict) -> dict[str, pl.DataFrame | str]:
    """`nsysql kernels FILE FILE...`: each export's kernels_shown table stacked with a `rank` column (`table`),
    and `said`, the note of each rank that has one (what its table leaves out), on a line naming its file ('' where
    no rank has one). An export that kernels does not apply to (no GPU activity recorded) is refused as one file
    is, naming it: left out, its rank would be absent from the table without a word."""
    got = shown_each(profiles, ranks, "kernels_shown", params)  # kernels_shown refuses an export it misses
    got.sort(key=lambda rg: rg[0])
    # a rank whose GPU work holds no kernel (copies and memsets only) adds no row: its line says so, as one file's
    # answer would ("no kernels"), unless its note already says what its table leaves out
    notes = [
        (r, g["note"]["note"][0] if g["note"]["note"][0] is not None else "no kernels")
        for r, g in got
        if g["note"]["note"][0] is not None or not g["table"].height
    ]
    return {"table": _stacked(got, "table"), "said": _each_said(profiles, ranks, notes)}


def _stacked(got: list[tuple[int, dict]], table: str) -> pl.DataFrame:
    """The frames `table` of shown_each's answers (in rank order) as one, `rank` first, as stack stacks them."""
    out = pl.concat([g[table] for _, g in got], how="diagonal_relaxed")
    return out.select("rank", *[c for c in out.columns if c != "rank"])


def _each_said(profiles: list, ranks: list[int], notes: list[tuple[int, str]]) -> str:
    """Each rank's note (rank, note) on a line of its own, naming the rank's file as one file's answer would."""
    names = {r: p.path.name for p, r in zip(profiles, ranks)}
    return "\n".join(f"rank {r} ({names[r]}): {n}" for r, n in notes)


def connect_dask(address: str):
    try:
        from dask.distributed import Client
    except ImportError:
        raise NsysqlError("`dask` needs Dask: pip install 'nsysql[dask]'", option="dask") from None
    # A Client left to the garbage collector (one whose start failed, or one closed but still in a reference
    # cycle) closes its loop runner from __del__, taking that runner's lock; if the collector runs inside a new
    # Client's start, which holds the same lock while its loop thread starts, neither ever goes on. So collect
    # here, holding no lock, before a Client starts and after one failed to.
    gc.collect()
    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as e:
        err = NsysqlError(f"cannot reach the Dask scheduler at {address} ({e})")
    except (ValueError, TypeError) as e:  # distributed's parse of the address: no port, an unbracketed IPv6, ...
        err = NsysqlError(
            f"`dask` {address}: not a Dask scheduler address, e.g. tcp://host:8786 ({one_line(e)})", option="dask"
        )
    gc.collect()
    raise err
