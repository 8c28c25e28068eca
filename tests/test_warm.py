"""A warm command: its answer read from the store (or the text kept of it) prints the same bytes as when it was
computed, and is read without the facade, the analyses, DuckDB or polars (nsysql.cli.warm)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, ROOT, built_cache, fixture

import nsysql
from nsysql.cli import main

SMALL = fixture("train_small")
# every command that prints an answer of a declared analysis (on a fixture it applies to), some with options
COMMANDS = [
    (SMALL, ["summary"]),
    (SMALL, ["summary", "-f", "json", "--top", "3", "--attribution", "thread"]),
    (SMALL, ["kernels", "-f", "csv"]),
    (SMALL, ["kernels", "--by", "category"]),
    (SMALL, ["kernels", "--per", "iteration", "--by", "category"]),
    (SMALL, ["launches", "--by", "kernel"]),
    (SMALL, ["api"]),
    (SMALL, ["ranges"]),
    (SMALL, ["ranges", "--expand", "-f", "json"]),
    (SMALL, ["kernels-by-range"]),
    (SMALL, ["iterations"]),
    (SMALL, ["iterations", "-f", "json", "--skip", "2", "--outlier-sigmas", "2"]),
    (SMALL, ["gaps"]),
    (SMALL, ["gaps", "-f", "csv", "--by", "cause", "--min", "2ms"]),
    (SMALL, ["gaps", "--explain", "--by", "cause"]),
    (SMALL, ["info"]),
    (fixture("ops_mlp"), ["ops"]),
    (FIXTURES / "ddp_pair" / "rank0.sqlite", ["overlap"]),
    (FIXTURES / "ddp_blobs" / "rank0.sqlite", ["collectives"]),
    (fixture("hw_mix"), ["metrics"]),
    (fixture("mem_growth"), ["gpu-memory"]),
    (fixture("loader_cpu_after"), ["cpu"]),
]


# the first command on each export starts from an empty cache (its first run builds the entry, cold); the others
# from the entry a first load builds, with no answer stored (conftest.built_cache), which their first run computes
COLD = {next(i for i, (p, _) in enumerate(COMMANDS) if p == path) for path, _ in COMMANDS}


@pytest.mark.parametrize(
    "path,args,cold", [(p, a, i in COLD) for i, (p, a) in enumerate(COMMANDS)], ids=[" ".join(a) for _, a in COMMANDS]
)
def test_a_stored_answer_prints_the_bytes_its_computation_printed(tmp_path, path, args, cold):
    """Each command three times on one cache: the first computes its answer (and stores it with its text), the
    second reads the answer and renders it (nsysql.tuning's printed_answers off), the third prints the text kept;
    the output is the same, byte for byte. Then, at another width, the text is rendered for that width."""
    cache = tmp_path / "a" if cold else built_cache(tmp_path / "a", path)
    cmd = ["--cache-dir", str(cache), args[0], str(path), *args[1:]]
    first = CliRunner().invoke(main, cmd, catch_exceptions=False)
    assert first.exit_code == 0 and first.output.strip(), first.output
    off = CliRunner(env={"NSYSQL_NO_TUNING": "printed_answers"}).invoke(main, cmd, catch_exceptions=False)
    assert (off.exit_code, off.output) == (first.exit_code, first.output)
    kept = CliRunner().invoke(main, cmd, catch_exceptions=False)
    assert (kept.exit_code, kept.output) == (first.exit_code, first.output)
    if "-f" not in args:  # a table: fitted to $COLUMNS, the width is part of what was kept
        narrow = CliRunner(env={"COLUMNS": "60"}).invoke(main, cmd, catch_exceptions=False)
        # computed afresh at that width, on an entry built as `first` built its own (conftest.built_cache)
        fresh_cache = str(built_cache(tmp_path / "b", path))
        fresh = CliRunner(env={"COLUMNS": "60"}).invoke(main, ["--cache-dir", fresh_cache, *cmd[2:]])
        assert narrow.output == fresh.output


def _imports(cache, args, no_tuning="") -> tuple[str, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NSYSQL_CACHE_DIR": str(cache), "NSYSQL_NO_TUNING": no_tuning}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nsysql", *args], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return out.stdout, names


WARM = (["summary", str(SMALL)], ["kernels", str(SMALL), "--top", "5"], ["gaps", str(SMALL), "-f", "csv"])


@pytest.mark.long
def test_a_warm_command_imports_neither_the_facade_the_analyses_nor_duckdb(tmp_path):
    """What a stored answer does not need is not imported: the Profile, the declarations and the analyses'
    modules, DuckDB; nor polars where the text printed is kept (nsysql.tuning's printed_answers). The first run
    (its answer computed, on the entry a first load builds: conftest.built_cache) imports them all; then the
    warm runs, with printed_answers on and off, read what it stored: off, the answer is rendered again (polars)
    though its text is kept beside it."""
    for i, args in enumerate(WARM):
        cold, before = _imports(built_cache(tmp_path / str(i), SMALL), args)
        assert {"duckdb", "polars", "nsysql.profile", "nsysql.analyses.catalog"} <= before
        for printed in ("on", "off"):
            warm, after = _imports(tmp_path / str(i), args, "" if printed == "on" else "printed_answers")
            assert warm == cold, (args, printed)
            unneeded = {"duckdb", "polars"} if printed == "on" else {"duckdb"}
            assert not {n for n in after if n in unneeded or n.startswith(("nsysql.profile", "nsysql.analyses"))}, (
                args,
                printed,
            )
            assert ("polars" in after) == (printed == "off"), (args, printed)


def test_profile_methods_default_as_the_declarations_do():
    """The warm path keys a stored answer by the declaration's defaults (declared.json's `key`), the Profile by
    its methods' defaults: the same values, or a command would read another question's answer."""
    declared = json.loads((ROOT / "nsysql" / "cli" / "declared.json").read_text(encoding="utf-8"))
    checked = 0
    for name, d in declared.items():
        method = getattr(nsysql.Profile, name, None)
        if "key" not in d or not inspect.isfunction(method):
            continue
        sig = inspect.signature(method).parameters
        for p in d["key"]:
            if p["name"] in sig and "spellings" not in p:
                default = sig[p["name"]].default
                assert json.loads(json.dumps(default, default=str)) == p["default"], (name, p["name"])
                checked += 1
    assert checked > 20


def test_each_rendering_switch_keeps_a_text_of_its_own(tmp_path):
    """One cache, the same answer printed with each switch that shapes its text: each prints what rendering the
    answer prints (printed_answers off), never the text kept for another switch."""
    out = tmp_path / "out.txt"
    cache = ["--cache-dir", str(built_cache(tmp_path / "cache", SMALL))]  # no answer stored yet
    variants = [[], ["--unit", "ns"], ["--wide"], ["-f", "markdown"], ["-o", str(out)], ["--top", "2"]]
    for extra in [*variants, *variants]:  # twice: the second round prints the texts kept
        cmd = [*cache, "kernels", str(SMALL), *extra]
        got = CliRunner(env={"COLUMNS": "70"}).invoke(main, cmd).output + (out.read_text() if "-o" in extra else "")
        env = {"COLUMNS": "70", "NSYSQL_NO_TUNING": "printed_answers"}
        ref = CliRunner(env=env).invoke(main, cmd).output + (out.read_text() if "-o" in extra else "")
        assert got == ref and "count" in got, extra
