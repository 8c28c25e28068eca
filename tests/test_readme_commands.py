"""What the analyses' declarations derive: each command's options, nsysql/cli/declared.json and README's command
table (scripts/readme_commands.py regenerates the last two; its --check fails on either being stale)."""

import subprocess
import sys
from pathlib import Path

import click

import nsysql.profile  # noqa: F401 (declares every analysis)
from nsysql.cli import main
from nsysql.cli.declared import analysis_of
from nsysql.engine import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "readme_commands.py"


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--check", *args], capture_output=True, text=True)


def test_readme_table_and_manifest_are_current():
    out = _check()
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr


def test_a_stale_readme_table_fails_the_check(tmp_path):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `nsysql api "))
    stale = tmp_path / "README.md"
    stale.write_text(text.replace(row + "\n", ""), encoding="utf-8")
    out = _check("--readme", str(stale))
    assert out.returncode == 1 and f"+{row}" in out.stdout, out.stdout + out.stderr


def _commands():
    for name, cmd in main.commands.items():
        for sub, c in getattr(cmd, "commands", {}).items() if isinstance(cmd, click.Group) else [(None, cmd)]:
            yield (f"{name} {sub}" if sub else name), c


def test_each_parameter_of_a_declared_command_is_its_option():
    """A command that answers with a declared analysis takes each of its parameters that has a command-line form
    as an option of the same name, with its type's choices and its doc as help; derived, so a new parameter is
    on the command line at once."""
    derived = {name: analysis_of(c) for name, c in _commands() if analysis_of(c)}
    assert {"kernels", "api", "ranges", "kernels-by-range", "iterations", "gaps", "export", "trace"} <= set(derived)
    assert {"cpu", "collectives"} <= set(derived)
    # gaps: with --explain, gap_activity's --top; collectives: the findings' --slow-ratio under its table
    sources = {"gaps": ("gap_activity",), "collectives": ("collectives", "collective_findings")}
    for name, cmd in _commands():
        if name not in derived:
            continue
        opts = {p.name: p for p in cmd.params if isinstance(p, click.Option)}
        for p in (p for source in sources.get(name, (derived[name],)) for p in REGISTRY[source].params):
            if p.flag is None or p.type is list or (isinstance(p.type, tuple) and list in p.type):
                assert p.name not in opts, (name, p.name)
                continue
            assert p.name in opts, (name, p.name)
            assert opts[p.name].help == p.doc, (name, p.name)
            if p.choices:  # the parameter's, or those its Flag says the command line offers instead
                want = [c for c in (p.flag.choices or p.choices) if c is not None]
                assert list(opts[p.name].type.choices) == want, (name, p.name)


def test_a_flag_spelling_and_default_come_from_the_declaration():
    """gaps' min_ns is --min on the command line, with the default written as a user writes it; gap_activity's
    top is --top, 5 at least 1 there (all, in Python)."""
    gaps = dict(_commands())["gaps"]
    opts = {p.name: p for p in gaps.params}
    assert opts["min_ns"].opts == ["--min"] and opts["min_ns"].default == "1ms"
    assert opts["top"].default == 5 and opts["top"].type.min == 1
    assert REGISTRY["gap_activity"].params[-1].default is None


def test_values_only_the_command_line_has_are_declared():
    """`cpu -f folded` is a format cpu's declaration adds (the stacks, asked by="stack"); `collectives --by rank`
    a choice its Flag adds (across several FILEs): neither is written in the command's module."""
    cpu, coll = dict(_commands())["cpu"], dict(_commands())["collectives"]
    fmt = next(p for p in cpu.params if p.name == "fmt")
    assert list(fmt.type.choices) == ["table", "csv", "json", "markdown", *REGISTRY["cpu"].formats]
    assert "--folded" in {o for p in cpu.params for o in p.opts}
    by = next(p for p in coll.params if p.name == "by")
    assert "rank" in by.type.choices and "rank" not in REGISTRY["collectives"].params[0].choices
    ratio = next(p for p in coll.params if p.name == "slow_ratio")
    assert (ratio.type.min, ratio.type.max, ratio.type.min_open, ratio.default) == (0, 1, True, 0.5)


def test_profile_methods_of_written_commands_come_from_the_declarations():
    """Profile.cpu and Profile.collectives, whose commands are written (-f folded, several FILEs), are not: each
    takes its declaration's parameters, with their defaults."""
    import inspect

    from conftest import fixture

    import nsysql
    from nsysql.profile import Profile

    p = nsysql.load(fixture("train_small"))
    for name in ("cpu", "collectives"):
        assert name not in vars(Profile)
        sig = inspect.signature(getattr(p, name)).parameters.values()
        assert [(q.name, q.default) for q in sig] == [(d.name, d.default) for d in REGISTRY[name].params]


def test_entry_points_options_are_their_declared_parameters():
    """`nsysql ranks --dask --workers` are the parameters load_many declares, `profile` and `bundle`'s options
    those of nsysql.nsys.workflow's functions (entry points, not analyses), each function taking them by the same
    names; a bad Dask address is said of `dask`, not of a flag."""
    import inspect

    import pytest

    import nsysql
    import nsysql.many
    from nsysql.engine import ENTRY_POINTS
    from nsysql.nsys import workflow

    commands = dict(_commands())
    for command, fn in (("ranks", nsysql.many.load_many), ("profile", workflow.profile), ("bundle", workflow.bundle)):
        cmd = commands[command]
        opts = {p.name: p for p in cmd.params if isinstance(p, click.Option) and p.name != "help"}
        declared = ENTRY_POINTS[fn.__name__]
        assert not {p.name for p in declared} - set(opts), command
        for p in declared:
            assert opts[p.name].help == p.doc and p.name in inspect.signature(fn).parameters, (command, p.name)
        assert analysis_of(cmd) is None  # README's Python column names the function
    option = {(c, p.name): p for c in ("ranks", "bundle") for p in commands[c].params}
    assert option["ranks", "workers"].type.min == 1 and option["ranks", "dask"].metavar == "ADDRESS"
    assert list(option["bundle", "chart"].type.choices) == ["auto", "png", "svg"]
    pytest.importorskip("dask.distributed")
    with pytest.raises(nsysql.NsysqlError, match="^`dask` tcp://host:notaport: not a Dask scheduler address"):
        nsysql.load_many(["a.sqlite", "b.sqlite"], dask="tcp://host:notaport")
