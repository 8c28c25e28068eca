"""A warm command: its answer read from the store prints the same bytes as when it was computed, and is read
without the facade, the analyses or DuckDB (nsysql.cli.warm)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, ROOT, fixture

import nsysql
from nsysql.cli import main

SMALL = fixture("train_small")
# every command that prints an answer of a declared analysis (on a fixture it applies to), some with options
COMMANDS = [
    (SMALL, ["summary"]),
    (SMALL, ["summary", "-f", "json", "--top", "3", "--attribution", "thread"]),
    (SMALL, ["kernels", "-f", "csv"]),
    (SMALL, ["kernels", "--by", "category"]),
    (SMALL, ["kernels", "--per", "iteration", "--by", "category", "--top", "2"]),
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


@pytest.mark.parametrize("path,args", COMMANDS, ids=[" ".join(a) for _, a in COMMANDS])
def test_a_stored_answer_prints_the_bytes_its_computation_printed(tmp_path, path, args):
    """Each command twice on one cache: the first computes its answer (and stores it), the second reads it; the
    output is the same, byte for byte."""
    cmd = ["--cache-dir", str(tmp_path), args[0], str(path), *args[1:]]
    first = CliRunner().invoke(main, cmd, catch_exceptions=False)
    second = CliRunner().invoke(main, cmd, catch_exceptions=False)
    assert first.exit_code == 0 and first.output.strip(), first.output
    assert (second.exit_code, second.output) == (first.exit_code, first.output)


def _imports(cache, args) -> tuple[str, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NSYSQL_CACHE_DIR": str(cache)}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nsysql", *args], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return out.stdout, names


def test_a_warm_command_imports_neither_the_facade_the_analyses_nor_duckdb(tmp_path):
    """What a stored answer does not need is not imported: the Profile, the declarations and the analyses'
    modules, DuckDB. The first run (cold) imports them all."""
    path = str(SMALL)
    for i, args in enumerate((["summary", path], ["kernels", path, "--top", "5"], ["gaps", path, "-f", "csv"])):
        cold, before = _imports(tmp_path / str(i), args)
        warm, after = _imports(tmp_path / str(i), args)
        assert warm == cold
        assert {"duckdb", "nsysql.profile", "nsysql.analyses.catalog"} <= before
        assert not {n for n in after if n == "duckdb" or n.startswith(("nsysql.profile", "nsysql.analyses"))}, args


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
