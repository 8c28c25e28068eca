"""Every command's output on every export at hand, as one JSON file: to show that a change kept the answers.

    PYTHONPATH=OLD_TREE python -P scripts/answers_snapshot.py old.json
    PYTHONPATH=NEW_TREE python -P scripts/answers_snapshot.py new.json
    python scripts/answers_snapshot.py --diff old.json new.json

Runs in one process per tree (click's CliRunner), with a fresh cache directory, over fixtures/ and the exports in
../shared/nsys-exports (when present). Each entry holds a command's exit code, stdout and stderr.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "nsys-exports"

COMMANDS = [
    ["info"],
    ["summary"],
    ["kernels"],
    ["api"],
    ["ranges"],
    ["kernels-by-range"],
    ["iterations"],
    ["gaps"],
    ["gaps", "--by", "cause"],
    ["report", "-f", "markdown"],
]


def exports() -> list[Path]:
    found = sorted(ROOT.glob("fixtures/*/*.sqlite"))
    for sub in ("h200", "public"):
        found += sorted((SHARED / sub).glob("*.sqlite"))
    return found


def snapshot(out: Path) -> None:
    os.environ["NSYSQL_CACHE_DIR"] = tempfile.mkdtemp(prefix="nsysql-snapshot-")
    from click.testing import CliRunner

    from nsysql.cli import main

    result = {}
    for path in exports():
        for cmd in COMMANDS:
            res = CliRunner().invoke(main, [cmd[0], str(path), *cmd[1:]])
            result[f"{path.relative_to(ROOT.parent)} :: {' '.join(cmd)}"] = {
                "exit": res.exit_code,
                "stdout": res.stdout,
                "stderr": res.stderr,
            }
    pairs = sorted(ROOT.glob("fixtures/ddp_pair/rank*.sqlite"))
    if pairs:
        res = CliRunner().invoke(main, ["ranks", *map(str, pairs)])
        result["ddp_pair :: ranks"] = {"exit": res.exit_code, "stdout": res.stdout, "stderr": res.stderr}
    out.write_text(json.dumps(result, indent=1, sort_keys=True))
    print(f"{len(result)} outputs -> {out}", file=sys.stderr)


def diff(a: Path, b: Path) -> int:
    import difflib

    old, new = json.loads(a.read_text()), json.loads(b.read_text())
    changed = 0
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        changed += 1
        print(f"=== {key}")
        for part in ("exit", "stdout", "stderr"):
            x, y = str((old.get(key) or {}).get(part, "")), str((new.get(key) or {}).get(part, ""))
            if x != y:
                sys.stdout.writelines(
                    difflib.unified_diff(x.splitlines(True), y.splitlines(True), f"old {part}", f"new {part}", n=1)
                )
    print(f"{changed} of {len(set(old) | set(new))} outputs differ", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--diff"] and len(args) == 3:
        sys.exit(diff(Path(args[1]), Path(args[2])))
    if len(args) != 1 or args[0].startswith("-"):  # --help, or a typo: never a file named after an option
        sys.exit(__doc__)
    snapshot(Path(args[0]))
