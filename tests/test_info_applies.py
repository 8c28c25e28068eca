"""`info`'s "which analyses apply": every declared analysis, from the registry, with why one does not apply (the
canonical tables it requires, Analysis.requires, that hold no rows)."""

from __future__ import annotations

from click.testing import CliRunner
from conftest import FIXTURES, craft

import nsysql
from nsysql.cli import main
from nsysql.engine import REGISTRY, plan


def _applies(path) -> dict[str, str]:
    with nsysql.load(path) as p:
        info = p.info()
    rows = info.filter(info["section"] == "analyses")
    assert rows["item"].is_unique().all()
    return dict(zip(rows["item"], rows["value"]))


def test_an_export_without_nvtx_says_the_range_analyses_do_not_apply(tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSQL_CACHE_DIR", str(tmp_path / "cache"))
    bare = craft(tmp_path / "no_nvtx.sqlite", "DROP TABLE NVTX_EVENTS")
    got = _applies(bare)
    assert set(got) == {n for n, a in REGISTRY.items() if not a.view}  # every declared analysis, once; no view
    for name in ("ranges", "kernels_by_range", "iterations", "ops"):
        assert got[name].startswith("no: no NVTX ranges: nvtx_ranges is empty; annotate the code"), (name, got[name])
    for name in ("kernels", "api", "launches", "gaps", "summary"):
        assert got[name] == "yes", (name, got[name])
    # the same export with its NVTX ranges: they apply
    assert _applies(craft(tmp_path / "whole.sqlite"))["ranges"] == "yes"
    res = CliRunner().invoke(main, ["info", str(bare), "-f", "csv"])
    # (quoted: the hint holds a comma)
    assert res.exit_code == 0 and 'analyses,ranges,"no: no NVTX ranges: nvtx_ranges is empty; annotate' in res.stdout


def test_what_an_analysis_requires_is_among_the_tables_it_or_its_needs_read():
    for name, a in REGISTRY.items():
        read = {t for n in plan(name) for t in REGISTRY[n].tables}
        required = {t for r in a.requires for t in r.split("|")}  # "a|b": either
        assert required <= read, (name, required - read)


def test_info_says_collectives_applies_where_the_command_answers(tmp_path):
    """`collectives` answers per kind from the NCCL kernels' names where no NCCL range carries a size: `info`
    says it applies there (and why no size), and does not where the command refuses."""
    from conftest import fixture, raw

    cache = str(tmp_path / "cache")
    for path in (
        FIXTURES / "ddp_pair" / "rank0.sqlite",
        FIXTURES / "ddp_blobs" / "rank0.sqlite",
        fixture("train_small"),
    ):
        nccl_kernels = raw(
            path,
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
            "WHERE lower(s.value) LIKE '%nccl%'",
        )[0][0]
        with nsysql.load(path, cache_dir=cache) as p:
            info = p.info()
        said = dict(zip(info["item"], info["value"]))["collectives"]
        res = CliRunner().invoke(main, ["--cache-dir", cache, "collectives", str(path)])
        assert said.startswith("yes") == (res.exit_code == 0) == (nccl_kernels > 0), (path, said, res.stderr)
