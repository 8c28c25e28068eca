"""A value the declaration refuses is refused before any export is opened, in one line naming the option."""

from __future__ import annotations

import click
from click.testing import CliRunner

from nsysql.cli import main
from nsysql.cli.manifest import DECLARED

# per kind of parameter, a value no declaration's normalize function takes (click's own type lets each through)
BAD = {"float": "nan", "int": "nan", "str": "soon"}


def _commands(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


def _checked_options():
    """(command words, its option, a value refused) for every option with a normalize function."""
    for words, cmd in _commands(main):
        for analysis in getattr(cmd.callback, "__nsysql_declared__", ()):
            for p in DECLARED[analysis]["params"]:
                if p.get("normalize"):
                    yield words, cmd, p["flag"], BAD[p["kind"]]


def test_a_refused_value_is_said_before_the_export_is_opened(tmp_path):
    missing = str(tmp_path / "absent.sqlite")
    seen = set()
    for words, cmd, flag, bad in _checked_options():
        files = [missing, missing] if words == ("diff",) else [missing]
        res = CliRunner().invoke(main, [*words, *files, flag, bad])
        assert res.exit_code == 2, (words, flag, res.output)
        line = res.stderr.strip()
        assert "\n" not in line and flag in line and bad in line, (words, flag, line)
        assert "absent.sqlite" not in line and "Traceback" not in res.output, (words, flag, line)
        seen.add(flag)
    # every numeric parameter the issue names, and the duration one
    assert {"--outlier-sigmas", "--slow-ratio", "--fail-above", "--min"} <= seen


def test_a_default_or_good_value_goes_on_to_the_load(tmp_path):
    """Only refused values stop the command: a good one reaches FILE, which is then the problem said."""
    missing = str(tmp_path / "absent.sqlite")
    for args in (["iterations", missing, "--outlier-sigmas", "2"], ["collectives", missing, "--slow-ratio", "0.3"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and "absent.sqlite" in res.stderr, res.output
