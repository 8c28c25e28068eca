"""Every command on every export at hand (the h200 and public exports in ../shared, and fixtures/): exit 0, or
exit 2 with one line on stderr saying why the analysis does not apply; never a traceback, never a failed query.

The commands run in-process (click's CliRunner) on the session's cache directory (conftest.py), seeded with the
entry the run builds once per export (conftest.seeded): the cold build is under test elsewhere."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import h200_exports, own_exports, public_exports, seeded

from nsysql.cli import main

FILES = own_exports() + h200_exports() + public_exports()

COMMANDS = {
    "info": ["info"],
    "summary": ["summary"],
    "kernels": ["kernels"],
    "api": ["api"],
    "ranges": ["ranges"],
    "kernels-by-range": ["kernels-by-range"],
    "iterations": ["iterations"],
    "gaps": ["gaps"],
    "gaps-by-cause": ["gaps", "--by", "cause"],
    "report-html": ["report", "-o", "{out}/report.html"],
    "report-markdown": ["report", "-f", "markdown"],
    "export": ["export", "--to", "{out}/export"],
}


def _cases():
    for path in FILES:
        for cmd in COMMANDS:
            yield pytest.param(path, cmd, id=f"{path.stem[:40]}-{cmd}")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")


@pytest.mark.skipif(not FILES, reason="no exports")
@pytest.mark.parametrize("path, cmd", list(_cases()))
def test_command_exits_0_or_says_in_one_line_why_not(path, cmd, out):
    seeded(path)
    args = [a.format(out=out) for a in COMMANDS[cmd]]
    res = CliRunner().invoke(main, [args[0], str(path), *args[1:]])
    lines = res.stderr.strip().splitlines()
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output and "Traceback" not in res.stderr
    assert res.exit_code in (0, 2), res.stderr
    if res.exit_code == 2:
        assert len(lines) == 1 and lines[0].startswith("nsysql: error: "), res.stderr
        assert "query failed" not in lines[0]  # a failed query is a bug, not an analysis that does not apply
