"""README.md's example outputs are what nsysql prints today (scripts/readme_examples.py regenerates them).

The examples run in this process (click's CliRunner, as every command test does), through the script's own
parsing and assembly (`regenerate`): only its `run`, which starts `python -m nsysql` once per command, is
replaced by one that invokes the CLI here and pipes the output through the example's shell pipeline. What the
executable adds around the CLI (its streams, its exit) is under test in test_cli.py and test_hostile_cli.py."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess

from click.testing import CliRunner
from conftest import ROOT, built_cache

from nsysql.cli import main

spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "scripts" / "readme_examples.py")
readme_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_examples)


def in_process(command: str, cache_dir: str) -> list[str]:
    """readme_examples.run's output lines for `command`, the CLI invoked here: its stderr then its stdout (as
    `2>&1` into a pipe shows them: stderr unbuffered, stdout flushed at exit), piped through the rest of the
    example's pipeline in bash."""
    head, _, pipeline = command.partition(" | ")
    words = shlex.split(head)
    assert words[0] == "nsysql" and "|" not in words, command
    env = {"COLUMNS": "200", "NO_COLOR": "1", "NSYSQL_PROFILE": None}
    res = CliRunner(env=env).invoke(main, ["--cache-dir", cache_dir, *words[1:]], catch_exceptions=False)
    assert res.exit_code == 0, (command, res.output)
    text = res.stderr + res.stdout
    if pipeline:
        out = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], input=text, capture_output=True, text=True)
        assert out.returncode in (0, 141), (command, out.stderr)  # 141: `| head` closed the pipe early
        text = out.stdout
    return [line.rstrip() for line in text.rstrip("\n").split("\n")]


def test_readme_examples_are_current(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name fixtures/ from the repository root
    monkeypatch.setattr(readme_examples, "run", in_process)
    # one thread: the CLI's streams are the process's own (CliRunner swaps them), so commands run one at a time
    monkeypatch.setattr(readme_examples.os, "cpu_count", lambda: 1)
    old = readme_examples.README.read_text(encoding="utf-8")
    assert len(readme_examples.examples(old)) >= 10  # the examples were found
    # the entries the examples' exports get at their first load, copied in (conftest.built_cache): an example
    # prints the same from an entry as from the export, and the cold build is under test elsewhere
    named = {w for _, _, cmds in readme_examples.examples(old) for c in cmds for w in shlex.split(c.split("|")[0])}
    exports = sorted(ROOT / w for w in named if w.startswith("fixtures/") and (ROOT / w).is_file())
    new = readme_examples.regenerate(old, str(built_cache(tmp_path / "cache", *exports)))
    assert new.splitlines() == old.splitlines(), "README.md's examples are stale: run python scripts/readme_examples.py"
