"""Profiles and answers of unusual shape: thousands of columns, of distinct names, of iterations. Each command
answers in time that grows with the rows, never with their square, and in words that hold for the shape."""

from __future__ import annotations

import time

from click.testing import CliRunner
from conftest import built_cache, fixture

from nsysql.cli import main


def _cli(*args, env=None):
    res = CliRunner(env=env).invoke(main, list(map(str, args)))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_an_answer_of_thousands_of_columns_renders_in_linear_time(tmp_path):
    """A user's query may return thousands of columns (a pivot): the table fits the terminal by leaving out the
    right-most ones and says which, the Markdown table holds them all; each column is looked at a fixed number of
    times (3,000 of them took 10 s per format when each one cost a pass over all)."""
    src = fixture("train_small")
    cache = built_cache(tmp_path / "cache", src)
    n = 3000
    query = "SELECT " + ", ".join(f"{i} AS c{i}" for i in range(n))
    for fmt in ("table", "markdown"):
        t = time.monotonic()
        res = _cli("--cache-dir", cache, "sql", "-f", fmt, src, query, env={"COLUMNS": "120"})
        took = time.monotonic() - t
        assert res.exit_code == 0, res.output
        assert took < 3, f"{fmt}: {took:.1f} s for {n} columns"
        head = res.output.splitlines()[0]
        if fmt == "markdown":
            assert head.count("|") == n + 1 and f"| c{n - 1} |" in head
        else:
            shown = head.split()
            assert shown == [f"c{i}" for i in range(len(shown))] and 1 < len(shown) < n
            note = res.output.rstrip().splitlines()[-1]
            assert note.startswith(f"(--wide shows {n - len(shown)} more columns, -f csv every value: c{len(shown)}, ")
