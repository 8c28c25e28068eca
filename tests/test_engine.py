"""The engine and its registry of declared analyses: every declaration is well-formed (its needs are declared
and form no circle, its parameters have types and defaults, its SQL files exist and the canonical tables they
read are declared), every Profile method asks one declaration, and an analysis gets only what it declares."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES, ROOT, built_cache, loaded

import nsysql
from nsysql import queries
from nsysql.analyses import catalog  # noqa: F401 (fills the registry)
from nsysql.engine import REGISTRY, REQUIRED, Analysis, Param, plan
from nsysql.profile import Profile

# Profile's members that are the facade's own plumbing, not questions about the profile
PLUMBING = {"con", "answers", "check_open", "close", "worker", "parallel", "interrupt", "sql", "cache_entry", "plan"}
PLUMBING.add("each")  # several requests at once, side by side (nsysql stats)
PLUMBING.add("shown")  # one request as its command shows it: the analysis' refusal where it does not apply

_CREATE = re.compile(
    r"create\s+(?:or\s+replace\s+)?(?:temp\s+|temporary\s+)?(?:table|view)\s+(?:if\s+not\s+exists\s+)?([a-z_]\w*)"
)


def _sql_words(path: Path) -> set[str]:
    """The identifiers of a SQL file, comments left out."""
    return set(re.findall(r"[a-z_]\w*", re.sub(r"--[^\n]*", "", path.read_text().lower())))


def _canonical() -> set[str]:
    """The public tables and views the canonical SQL files create (not `_`-prefixed helpers)."""
    names = set()
    for f in queries.canonical_files():
        names |= {n for n in _CREATE.findall(re.sub(r"--[^\n]*", "", f.read_text().lower())) if n[0] != "_"}
    return names


def _types(p: Param) -> tuple:
    return p.type if isinstance(p.type, tuple) else (p.type,)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_declaration_is_well_formed(name):
    a: Analysis = REGISTRY[name]
    order = plan(name)  # raises for an undeclared need or a circle
    assert order[-1] == name and len(order) == len(set(order))
    for i, n in enumerate(order):  # each after everything it needs
        assert {m for m in REGISTRY[n].needs if m != n} <= set(order[:i])
    assert a.keep in ("store", "memory", "none") and a.doc.strip()
    assert len({p.name for p in a.params}) == len(a.params)
    for p in a.params:
        assert p.name.isidentifier() and all(isinstance(t, type) for t in _types(p)), p
        if p.default is not REQUIRED:
            assert isinstance(p.default, _types(p)), p
        if p.choices is not None:
            assert p.default is REQUIRED or p.default in p.choices, p
            assert all(c is None or isinstance(c, _types(p)) for c in p.choices), p
    assert list(inspect.signature(a.fn).parameters)[1:] == [p.name for p in a.params]
    canonical = _canonical()
    assert set(a.tables) <= canonical, set(a.tables) - canonical
    read = set()
    for s in a.sql:
        path = queries.queries_dir() / "analyses" / f"{s}.sql"
        assert path.is_file(), path
        read |= _sql_words(path) & canonical
    assert read <= set(a.tables), f"{name}'s SQL reads {sorted(read - set(a.tables))}, not declared in tables"


def test_each_profile_method_asks_the_declaration_of_its_name():
    members = {n for n in dir(Profile) if not n.startswith("_")} - PLUMBING
    assert members, "Profile has no analyses?"
    for n in sorted(members):
        assert n in REGISTRY, f"Profile.{n} has no declaration"
        member = getattr(Profile, n)
        if isinstance(member, property):
            assert not REGISTRY[n].params
            continue
        sig = list(inspect.signature(member).parameters.values())[1:]
        decl = REGISTRY[n].params
        assert [p.name for p in sig] == [p.name for p in decl], n
        for p, d in zip(sig, decl):
            if n == "diff":  # the facade passes the other Profile's engine
                continue
            want = inspect.Parameter.empty if d.default is REQUIRED else d.default
            assert p.default == want, (n, p.name)
        src = inspect.getsource(member)
        body = src[src.index('"""', src.index('"""') + 3) + 3 :].strip()
        assert body.startswith(f'return self._engine.run(\n            "{n}"') or body.startswith(
            f'return self._engine.run("{n}"'
        ), f"Profile.{n} does more than ask the engine"


def test_the_engine_layer_imports_no_analysis_and_no_front_end():
    for f in sorted((ROOT / "nsysql" / "engine").glob("*.py")):
        text = f.read_text()
        imports = re.findall(r"^\s*(?:from|import)\s+([.\w]+)", text, re.M)
        assert not [m for m in imports if re.match(r"\.\.(analyses|profile|cli|report|render)\b", m)], f


def test_an_analysis_gets_only_the_answers_it_declares(tmp_path):
    """A declaration that asks an analysis it does not list among its needs is refused (so the plan read from
    the declarations is the whole truth); one that lists it gets the same answer as the Profile."""
    from nsysql.engine import analysis

    @analysis("_test_sneaky", keep="none")
    def sneaky(ctx):
        """Asks kernels without declaring it."""
        return ctx.ask("kernels")

    @analysis("_test_honest", keep="none", needs=("kernels",))
    def honest(ctx):
        """Asks kernels, declared."""
        return ctx.ask("kernels", top=3)

    try:
        small = FIXTURES / "train_small" / "train_small.sqlite"
        p = nsysql.load(small, cache_dir=built_cache(tmp_path / "cache", small))  # no answer stored yet
        with pytest.raises(RuntimeError, match="does not declare"):
            p._engine.run("_test_sneaky")
        assert p._engine.run("_test_honest").equals(p.kernels(top=3))
        assert p._engine.plan("_test_honest") == ["resolve_range", "iteration_range", "kernels", "_test_honest"]
        with pytest.raises(TypeError, match="unexpected keyword argument 'topp'"):
            p._engine.run("kernels", topp=3)
    finally:
        REGISTRY.pop("_test_sneaky", None)
        REGISTRY.pop("_test_honest", None)


def test_a_closed_profile_answers_nothing_even_remembered(tmp_path):
    small = FIXTURES / "train_small" / "train_small.sqlite"
    p = nsysql.load(small, cache_dir=built_cache(tmp_path / "cache", small))
    p.kernels()
    p.close()
    for ask in (p.kernels, p.findings, lambda: p.facts):
        with pytest.raises(nsysql.NsysqlError, match="closed"):
            ask()


@pytest.mark.parametrize("k", [0, 1.5, 3, 50])
def test_outlier_sigmas_is_k_of_the_outlier_rule(k):
    """A declared threshold: each steady-state step is an outlier exactly when it is slower than median +
    max(k x 1.4826 x MAD, 25% of the median, 50 us) of the steady-state steps (warm-up fixed by skip)."""
    p = loaded(str(FIXTURES / "train_small" / "train_small.sqlite"))
    its = p.iterations(skip=1, outlier_sigmas=k)
    steady = its.filter(~pl.col("warmup"))
    t = steady["step_ns"].cast(pl.Float64)
    med = t.median()
    thr = med + max(k * 1.4826 * (t - med).abs().median(), 0.25 * med, 50_000)
    assert steady["outlier"].to_list() == [x > thr for x in t.to_list()]
    assert p.iteration_stats(skip=1, outlier_sigmas=k)["outliers"][0] == steady["outlier"].sum()
    if k == 3:  # the default
        assert its.equals(p.iterations(skip=1))


def test_outlier_sigmas_refuses_what_is_no_k():
    p = loaded(str(FIXTURES / "train_small" / "train_small.sqlite"))
    for bad in (-1, float("nan"), float("inf"), "3", True):
        with pytest.raises(nsysql.NsysqlError, match="outlier_sigmas` must be a number 0 or more"):
            p.iterations(outlier_sigmas=bad)


def test_findings_thresholds_are_parameters():
    """Each finding's limit is a declared parameter: one set past what any export can reach (a share over 1,
    busy under 0%, 2^62 bytes, over 100% of kernel time) takes away that finding and only it; without the
    data-loader finding, the idle time is no longer explained by host work, so launch bound (whose figures
    hold on this fixture) is said instead, as findings' rules state."""
    from nsysql.analyses.findings import Thresholds

    p = loaded(str(FIXTURES / "train_small" / "train_small.sqlite"))
    default = set(p.findings()["finding"])
    cases = {
        "host_share": (1.01, "data-loader bound"),
        "idle_busy_pct": (0.0, "GPU mostly idle"),
        "pageable_min_bytes": (2**62, "pageable host-to-device copies"),
        "no_tensor_core_pct": (100.01, "matrix math without tensor cores"),
    }
    assert {name for _, name in cases.values()} <= default
    for field, (value, name) in cases.items():
        instead = {"launch bound"} if name == "data-loader bound" else set()
        assert set(p.findings(Thresholds(**{field: value}))["finding"]) == default - {name} | instead, field
    assert p.findings(Thresholds()).equals(p.findings())
    assert p.summary(thresholds=Thresholds(host_share=1.01))["findings"]["finding"].to_list() == (
        p.findings(Thresholds(host_share=1.01))["finding"].to_list()
    )
