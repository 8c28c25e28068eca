"""`info`'s "commands" section: each command about one export (the analyses that declare one, Analysis.command),
whether it applies, and why not as the command itself says it when run (its analysis' refusal, Analysis.refusal,
or the canonical tables it requires, Analysis.requires, that hold no rows). Internal analyses are not listed."""

from __future__ import annotations

from click.testing import CliRunner
from conftest import FIXTURES, built_cache, craft, fixture, loaded, seeded

import nsysql
from nsysql.cli import main
from nsysql.cli.declared import analysis_of
from nsysql.engine import REGISTRY, plan

NVTX_HINT = "annotate the code with NVTX ranges"


def _applies(path) -> dict[str, str]:
    with nsysql.load(path) as p:
        info = p.info()
    return _commands(info)


def _commands(info) -> dict[str, str]:
    rows = info.filter(info["section"] == "commands")
    assert rows["item"].is_unique().all()
    return dict(zip(rows["item"], rows["value"]))


def test_the_declared_commands_are_the_cli_s():
    """A command's declaration (Analysis.command) names the command that answers with it, and no other."""
    declared = {a.command: n for n, a in REGISTRY.items() if a.command}
    answered = {name: analysis_of(c) for name, c in main.commands.items() if analysis_of(c) in REGISTRY}
    assert declared == answered


def test_info_lists_the_commands_not_the_analyses_behind_them():
    """train_small has no CUDA graph and no NCCL kernel: no internal piece (whole_graphs, collective_kernels) is
    listed as "yes"; each command about one export is listed once, by its command-line name."""
    got = _commands(loaded(str(fixture("train_small"))).info())
    assert set(got) == {a.command for a in REGISTRY.values() if a.command} - {"info"}
    assert set(got) <= set(main.commands)
    assert {"kernels-by-range", "gpu-memory", "metrics"} <= set(got)
    assert not set(got) & {"whole_graphs", "collective_kernels", "diff_side", "iteration_spans", "gpu_metrics"}


def test_yes_and_no_are_what_the_commands_do():
    """On two fixtures, each listed command of a few: "yes" where it exits 0, else "no: " and the one line it says
    on stderr; and Profile.why_not of its analysis says the same."""
    commands = ("kernels", "iterations", "collectives", "cpu", "ops", "overlap", "metrics", "gpu-memory")
    for path in (fixture("train_small"), FIXTURES / "ddp_pair" / "rank0.sqlite"):
        seeded(path)
        prof = loaded(str(path))
        said = _commands(prof.info())
        nos = 0
        for cmd in commands:
            res = CliRunner().invoke(main, [cmd, str(path), "-f", "csv"])
            assert said[cmd].startswith("yes") == (res.exit_code == 0), (path, cmd, said[cmd], res.output)
            if res.exit_code:
                nos += 1
                assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
                assert said[cmd] == "no: " + res.stderr.strip().split(f"{path}: ", 1)[1], (path, cmd)
                analysis = analysis_of(main.commands[cmd])
                assert said[cmd] == "no: " + prof.why_not(analysis), (path, cmd)
        assert nos >= 3, (path, said)  # train_small: no NCCL, samples, operators, metrics, memory events


def test_an_export_without_nvtx_says_the_range_commands_do_not_apply(tmp_path, monkeypatch):
    monkeypatch.setenv("NSYSQL_CACHE_DIR", str(tmp_path / "cache"))
    bare = craft(tmp_path / "no_nvtx.sqlite", "DROP TABLE NVTX_EVENTS")
    got = _applies(bare)
    for name in ("ranges", "kernels-by-range", "iterations"):
        assert got[name].startswith("no: no NVTX") and NVTX_HINT in got[name], (name, got[name])
    assert got["ops"].startswith("no: the export has no PyTorch operator ranges"), got["ops"]
    for name in ("kernels", "api", "launches", "gaps", "summary", "trace"):
        assert got[name] == "yes", (name, got[name])
    # the same export with its NVTX ranges (train_small itself, from the run's one entry of it): they apply
    built_cache(tmp_path / "cache", fixture("train_small"))
    assert _applies(fixture("train_small"))["ranges"] == "yes"
    res = CliRunner().invoke(main, ["info", str(bare), "-f", "csv"])
    # (quoted: the hint holds a comma)
    assert res.exit_code == 0 and 'commands,ranges,"no: no NVTX ranges: nvtx_ranges is empty; annotate' in res.stdout


def test_what_an_analysis_requires_is_among_the_tables_it_or_its_needs_read():
    for name, a in REGISTRY.items():
        read = {t for n in plan(name) for t in REGISTRY[n].tables}
        required = {t for r in a.requires for t in r.split("|")}  # "a|b": either
        assert required <= read, (name, required - read)


def test_info_says_collectives_applies_where_the_command_answers(tmp_path):
    """`collectives` answers per kind from the NCCL kernels' names where no NCCL range carries a size: `info`
    says it applies there (and why no size), and does not where the command refuses."""
    from conftest import raw

    paths = (FIXTURES / "ddp_pair" / "rank0.sqlite", FIXTURES / "ddp_blobs" / "rank0.sqlite", fixture("train_small"))
    cache = str(built_cache(tmp_path / "cache", *paths))  # the entries a first load builds, built once in the run
    for path in paths:
        nccl_kernels = raw(
            path,
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
            "WHERE lower(s.value) LIKE '%nccl%'",
        )[0][0]
        with nsysql.load(path, cache_dir=cache) as p:
            said = _commands(p.info())["collectives"]
        res = CliRunner().invoke(main, ["--cache-dir", cache, "collectives", str(path)])
        assert said.startswith("yes") == (res.exit_code == 0) == (nccl_kernels > 0), (path, said, res.stderr)


def test_info_says_iterations_does_not_apply_where_no_loop_is_found(tmp_path, monkeypatch):
    """train_small's NVTX ranges moved 8 s earlier, before any kernel: push/pop ranges remain, but none of their
    families launches GPU work, so `iterations` finds no loop (exit 2). `info` said "yes" (it looked only for
    push/pop ranges); it now says the detector's own line, as the command and Profile.why_not say it."""
    monkeypatch.setenv("NSYSQL_CACHE_DIR", str(tmp_path / "cache"))
    path = craft(
        tmp_path / "early.sqlite", 'UPDATE NVTX_EVENTS SET start = start - 8000000000, "end" = "end" - 8000000000'
    )
    res = CliRunner().invoke(main, ["iterations", str(path)])
    assert res.exit_code == 2 and "no repeating loop found" in res.stderr, res.output
    said = _applies(path)["iterations"]
    assert said == "no: " + res.stderr.strip().split(f"{path}: ", 1)[1], said
    with nsysql.load(path) as p:
        assert said == "no: " + p.why_not("iterations")
