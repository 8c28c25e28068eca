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
    for name, cmd in _commands():
        if name not in derived:
            continue
        opts = {p.name: p for p in cmd.params if isinstance(p, click.Option)}
        source = "gap_activity" if name == "gaps" else derived[name]  # gaps: with --explain, gap_activity's --top
        for p in REGISTRY[source].params:
            if p.flag is None or p.type is list or (isinstance(p.type, tuple) and list in p.type):
                assert p.name not in opts, (name, p.name)
                continue
            assert p.name in opts, (name, p.name)
            assert opts[p.name].help == p.doc, (name, p.name)
            if p.choices:
                assert list(opts[p.name].type.choices) == [c for c in p.choices if c is not None], (name, p.name)


def test_a_flag_spelling_and_default_come_from_the_declaration():
    """gaps' min_ns is --min on the command line, with the default written as a user writes it; gap_activity's
    top is --top, 5 at least 1 there (all, in Python)."""
    gaps = dict(_commands())["gaps"]
    opts = {p.name: p for p in gaps.params}
    assert opts["min_ns"].opts == ["--min"] and opts["min_ns"].default == "1ms"
    assert opts["top"].default == 5 and opts["top"].type.min == 1
    assert REGISTRY["gap_activity"].params[-1].default is None
