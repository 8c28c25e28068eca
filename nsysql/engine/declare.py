"""Declared analyses: what each question is called, takes, needs and runs, in one registry.

A declaration names its typed parameters (defaults and choices included, thresholds among them), what it needs
(canonical tables, and other analyses by name), the SQL files of queries/v1/analyses/ it runs, how its answer is
kept, and a pure function `fn(ctx, **params)` over a request context (nsysql.engine.core.Context): the
connection, and the answers of the analyses it needs. The declarations themselves live in the analyses layer
(nsysql.analyses.catalog); the engine below only reads this registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

# How an answer is kept: "store" (in memory and in the answers store beside the cache entry: frames only),
# "memory" (once per Profile and its workers, not stored: what is not frames), "none" (computed on every call:
# cheap compositions, writes, answers that depend on what the caller passes, like another Profile).
KEEPS = ("store", "memory", "none")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a parameter without a default: the caller must give it
SAME: Any = type("_Same", (), {"__repr__": lambda self: "SAME"})()  # Flag.default: the parameter's own default


@dataclass(frozen=True)
class Flag:
    """How a parameter is spelled on the command line, where it is not `--<name with dashes>` taking the
    parameter's default: the long `name` (`--min` for min_ns), a `short` one (`-f`), the `metavar` shown in
    help, the command line's own `default` (a duration written as the user writes it, `1ms`; a smaller `--top`),
    the `minimum` and `maximum` of a number (`min_open`: the minimum itself excluded), `path`: "dir" or "file"
    where the value names one, and `choices`: the values the command line offers where they are not the
    parameter's, fewer (cpu's `stack` is asked by `-f folded`, a declared format) or more (collectives' `rank`:
    across several FILEs, which only the command line gives). The option's help is the parameter's doc."""

    name: str | None = None
    short: str | None = None
    metavar: str | None = None
    default: Any = SAME
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False
    path: str | None = None
    choices: tuple | None = None


@dataclass(frozen=True)
class Param:
    """One parameter: `type` (a type or a tuple of types; None allowed where the default is None), `default`
    (or REQUIRED), `choices` (the values it may take, where it is one of a few), `normalize` (maps every
    spelling of a value to its canonical one, which both the answer's key and the function get), `doc` (one
    sentence; also the command line option's help), `flag` (its command line spelling, None where it has none:
    a Python object such as another Profile or the findings' Thresholds), `nsys` (the value under which the
    answer counts as nsys's own reports do: asked by one of nsys's report names, Analysis.nsys, the analysis takes
    it unless the caller gives another; None where nsys has no rule of its own for it)."""

    name: str
    type: type | tuple
    default: Any = REQUIRED
    choices: tuple | None = None
    normalize: Callable[[Any], Any] | None = None
    doc: str = ""
    flag: Flag | None = Flag()
    nsys: Any = None


@dataclass(frozen=True)
class Only:
    """Parts of a declaration (among its `needs`, `tables` and `sql`) that a request reads only where its
    parameter `param` takes one of `values` (or, `values` a function, where it says True of the value): kernels'
    `per` chooses whether the loop is found (iteration_range) or the NVTX nesting read (op_ranges). A part named
    by several `Only` is read where any of them holds; the rest of the declaration is read whatever the values.
    The engine plans a request's first pass over the export by them (nsysql.engine.core.reads)."""

    param: str
    values: tuple | Callable[[Any], bool]
    needs: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    sql: tuple[str, ...] = ()

    def holds(self, bound: dict) -> bool:
        """Whether the request's parameters (bound) choose these parts."""
        v = bound.get(self.param)
        if callable(self.values):
            try:
                return bool(self.values(v))
            except Exception:  # noqa: BLE001 - a value the analysis will refuse: planned as read, said by the run
                return True
        return v in self.values


@dataclass(frozen=True)
class Analysis:
    name: str
    fn: Callable
    params: tuple[Param, ...] = ()
    needs: tuple[str, ...] = ()  # other analyses, by name (its own name may be asked with other parameters)
    tables: tuple[str, ...] = ()  # canonical tables (queries/v1/canonical/) its SQL files read
    sql: tuple[str, ...] = ()  # files of queries/v1/analyses/, without .sql
    keep: str = "store"
    doc: str = field(default="")
    # what nsys calls the same question: `nsys stats` report names (`nsysql stats -r` takes them as aliases of
    # this analysis' report) or `recipe NAME`
    nsys: tuple[str, ...] = ()
    # canonical tables that must hold rows for the answer to say anything (`info` lists the analyses that apply);
    # an entry "a|b" is met where either holds rows
    requires: tuple[str, ...] = ()
    # the command that shows this analysis' answer (`nsysql <command> FILE`): derived with its options unless a
    # front-end module writes it (nsysql.cli.tables.derived), with Profile's method of the analysis' name
    # (nsysql.profile); `info` says of each command whether it applies to the export. None where none shows it
    command: str | None = None
    files: bool = False  # the command takes several FILEs (one per rank), stacked with a `rank` column
    # output formats the command writes besides the tables' (table, csv, json, markdown): format -> the
    # parameters the answer is asked with for it (cpu's `folded`: the stacks, by="stack")
    formats: dict[str, dict] = field(default_factory=dict)
    # what one command shows, composed of other answers (not a question of its own): `info` does not list it
    view: bool = False
    # parts of needs, tables and sql read only for some values of a parameter (see Only)
    only: tuple[Only, ...] = ()
    # `refusal(con)`: the one line the analysis, asked with its defaults, raises where this export holds nothing
    # it answers from (None where it answers), read cheaply, without running it: the analysis raises it from the
    # same function, and `why_not` and `info` say it, so that they say what its command says (nsysql.analyses.info)
    refusal: Callable | None = None
    # its answer says the export's path as the user named it (Context.path): see keyed_by_path
    names_path: bool = False

    @property
    def as_nsys(self) -> dict:
        """The parameters under which this analysis answers as the `nsys stats` reports named in `nsys` do (each
        parameter's `nsys` value; none for a recipe, `recipe NAME`): what a report asked by nsys's name is asked
        with, unless given otherwise."""
        if not any(" " not in n for n in self.nsys):
            return {}
        return {p.name: p.nsys for p in self.params if p.nsys is not None}

    def bind(self, given: dict) -> dict:
        """Every parameter's value for a call giving `given` (defaults filled, normalized), in declared order;
        TypeError for an unknown or missing one, as Python says it for a call."""
        names = {p.name for p in self.params}
        unknown = [k for k in given if k not in names]
        if unknown:
            raise TypeError(f"{self.name}() got an unexpected keyword argument {unknown[0]!r}")
        out = {}
        for p in self.params:
            v = given.get(p.name, p.default)
            if v is REQUIRED:
                raise TypeError(f"{self.name}() missing required argument: {p.name!r}")
            out[p.name] = p.normalize(v) if p.normalize else v
        return out


REGISTRY: dict[str, Analysis] = {}

# The parameters of entry points that are not one profile's analysis (nsysql.load_many's: where the loads of
# several exports run), declared as an analysis' are, so that a command takes them as options from the same
# declaration (scripts/readme_commands.py writes them into cli/declared.json): name -> parameters.
ENTRY_POINTS: dict[str, tuple[Param, ...]] = {}


def entry_point(name: str, params) -> tuple[Param, ...]:
    """Declare the parameters of the entry point `name` (a function of the library, not an analysis)."""
    if name in REGISTRY or name in ENTRY_POINTS:
        raise ValueError(f"{name!r} is declared twice")
    ENTRY_POINTS[name] = tuple(params)
    return ENTRY_POINTS[name]


def analysis(
    name: str,
    *,
    params=(),
    needs=(),
    tables=(),
    sql=(),
    keep: str = "store",
    nsys=(),
    requires=(),
    command: str | None = None,
    files: bool = False,
    formats: dict[str, dict] | None = None,
    view: bool = False,
    only=(),
    refusal: Callable | None = None,
    names_path: bool = False,
):
    """Decorator: declare `fn(ctx, **params)` as the analysis `name` in REGISTRY."""

    def wrap(fn):
        if name in REGISTRY:
            raise ValueError(f"analysis {name!r} is declared twice")
        if keep not in KEEPS:
            raise ValueError(f"analysis {name!r}: keep must be one of {KEEPS}, not {keep!r}")
        _check_only(name, only, params, needs, tables, sql)
        REGISTRY[name] = Analysis(
            name,
            fn,
            tuple(params),
            tuple(needs),
            tuple(tables),
            tuple(sql),
            keep,
            fn.__doc__ or "",
            tuple(nsys),
            tuple(requires),
            command,
            files,
            dict(formats or {}),
            view,
            tuple(only),
            refusal,
            names_path,
        )
        return fn

    return wrap


# the key under which a stored answer that names the export's path (keyed_by_path) keeps that path
PATH_KEY = "_path"


@lru_cache(maxsize=None)
def keyed_by_path(name: str) -> bool:
    """Whether analysis `name`'s answer says the export's path as the user named it (Analysis.names_path), itself
    or through an answer it needs. Every link to one export shares its entry (keyed by the file it resolves to),
    so such an answer is stored under that path too (PATH_KEY): one named by another link is never shown."""
    a = REGISTRY.get(name)
    return a is not None and (a.names_path or any(keyed_by_path(n) for n in a.needs if n != name))


def _check_only(name: str, only, params, needs, tables, sql) -> None:
    """ValueError where an `Only` of `name` names a parameter it does not take, or a part it does not declare."""
    for o in only:
        if o.param not in {p.name for p in params}:
            raise ValueError(f"analysis {name!r}: Only names {o.param!r}, which is not one of its parameters")
        for kind, declared in (("needs", needs), ("tables", tables), ("sql", sql)):
            extra = set(getattr(o, kind)) - set(declared)
            if extra:
                raise ValueError(f"analysis {name!r}: Only's {kind} {sorted(extra)} are not among its {kind}")


def plan(name: str, registry: dict[str, Analysis] | None = None) -> list[str]:
    """The analyses `name` needs, transitively, each after what it needs and `name` last: the order a request
    resolves them in. ValueError for a need that is not declared, or a circle of needs."""
    reg = REGISTRY if registry is None else registry
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(n: str, path: tuple[str, ...]) -> None:
        if n not in reg:
            raise ValueError(f"{' -> '.join(path)} needs {n!r}, which is not declared")
        if state.get(n) == "done":
            return
        if state.get(n) == "open":
            raise ValueError(f"a circle of needs: {' -> '.join((*path, n))}")
        state[n] = "open"
        for m in reg[n].needs:
            if m != n:
                visit(m, (*path, n))
        state[n] = "done"
        order.append(n)

    visit(name, ())
    return order
