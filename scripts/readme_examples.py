"""Regenerate (or check) the example outputs in README.md, as sqlite-utils does with cog.

An example is a fenced code block whose lines start with `$ nsysql ...`: everything after such a line, up to
the next `$ ` line or the end of the block, is that command's output. The script runs each command from the
repository root (a shell pipeline such as `| cut -c1-120 | head -8` is allowed) with a fresh cache directory
and puts its stdout and stderr back in place, so the README shows what nsysql prints today.

    python scripts/readme_examples.py          # rewrite README.md
    python scripts/readme_examples.py --check  # exit 1 and show the difference when README.md is stale

`tests/test_readme.py` runs the check, so output drift fails CI.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```")
PROMPT = "$ "


def run(command: str, cache_dir: str) -> list[str]:
    """Output lines of one README command; `nsysql` runs as this interpreter's `-m nsysql`."""
    assert command.startswith("nsysql "), command
    shell = f"{shlex.quote(sys.executable)} -m nsysql --cache-dir {shlex.quote(cache_dir)} {command[len('nsysql ') :]}"
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(ROOT))
    env.pop("NSYSQL_PROFILE", None)
    out = subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell + " 2>&1"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if out.returncode not in (0, 141):  # 141: `| head` closed the pipe early
        raise SystemExit(f"readme_examples: `{command}` exited {out.returncode}:\n{out.stdout}{out.stderr}")
    return [line.rstrip() for line in out.stdout.rstrip("\n").split("\n")]


def examples(text: str) -> list[tuple[int, int, list[str]]]:
    """Each example block of `text` as (index of its first command line, index of its closing fence, commands)."""
    lines = text.split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not FENCE.match(line) or i >= len(lines) or not lines[i].startswith(PROMPT + "nsysql "):
            continue
        start, commands = i, []
        while i < len(lines) and not FENCE.match(lines[i]):
            if lines[i].startswith(PROMPT):
                commands.append(lines[i][len(PROMPT) :])
            i += 1
        found.append((start, i, commands))
    return found


def first_input(command: str) -> str:
    """The first file a command names (its cache entry): commands on one file run one after another, so that
    only the first of them builds the entry and the others read it."""
    return next((w for w in shlex.split(command.split("|")[0]) if w.startswith("fixtures/")), command)


def regenerate(text: str, cache_dir: str) -> str:
    from concurrent.futures import ThreadPoolExecutor

    blocks = examples(text)
    groups: dict[str, list[str]] = {}
    for _, _, commands in blocks:
        for command in commands:
            groups.setdefault(first_input(command), []).append(command)
    # the groups side by side (each command is a process of its own; the CPU count bounds the threads)
    with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        outputs = dict(
            kv for done in pool.map(lambda g: [(c, run(c, cache_dir)) for c in g], groups.values()) for kv in done
        )
    lines = text.split("\n")
    result: list[str] = []
    at = 0
    for start, end, commands in blocks:
        result.extend(lines[at:start])
        for k, command in enumerate(commands):
            if k:
                result.append("")
            result.append(PROMPT + command)
            result.extend(outputs[command])
        at = end
    result.extend(lines[at:])
    return "\n".join(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs from the regenerated text")
    args = parser.parse_args()
    old = README.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="nsysql-readme-") as cache_dir:
        new = regenerate(old, cache_dir)
    if new == old:
        return 0
    if args.check:
        sys.stdout.writelines(
            difflib.unified_diff(old.splitlines(True), new.splitlines(True), "README.md", "README.md (regenerated)")
        )
        print("README.md's examples are stale: run python scripts/readme_examples.py", file=sys.stderr)
        return 1
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
