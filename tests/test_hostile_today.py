"""Hostile inputs against the code paths of the backtrace, thread-role, MPI-rank, whole-graph, collectives-by-name
and diff changes: each command answers (exit 0, true output) or refuses in one line on stderr naming the file
(exit 2), never a traceback, a failed query, or a write into the export."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner
from conftest import craft, fixture, raw

from nsysql.cli import main

CALLS = "CUPTI_ACTIVITY_KIND_RUNTIME"
# a row nsysql takes for a CUDA backtrace: eventClass one of ENUM_NSYS_EVENT_CLASS's
# TRACE_PROCESS_EVENT_CUDABACKTRACE(_START, _FINISH) codes, a whole number (25_calls.sql)
BACKTRACE = "typeof(eventClass) = 'integer' AND eventClass IN (67, 68, 69)"


def _cli(*args):
    res = CliRunner().invoke(main, list(map(str, args)))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def _relaxed(decl: str, value: str) -> list[str]:
    """Statements that rebuild the runtime table with eventClass declared `decl` and set to `value` (SQL over
    the old row), its other columns as they were."""
    cols = '"start", "end", globalTid, correlationId, nameId, returnValue, callchainId'
    return [
        f'CREATE TABLE rt2 ("start" INTEGER, "end" INTEGER, eventClass {decl}, globalTid INTEGER, '
        "correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER)",
        f"INSERT INTO rt2 (eventClass, {cols}) SELECT {value}, {cols} FROM {CALLS}",
        f"DROP TABLE {CALLS}",
        f"ALTER TABLE rt2 RENAME TO {CALLS}",
    ]


# eventClass values no nsys writes: text, a real between codes (67.5: no backtrace, whatever a cast to a whole
# number makes of it), a blob, a column declared TEXT; each on some rows, the others keep their codes (0 and 1)
HOSTILE_CLASSES = {
    "text": [f"UPDATE {CALLS} SET eventClass = 'CUDABACKTRACE' WHERE rowid % 3 = 0"],
    "real": [f"UPDATE {CALLS} SET eventClass = 67.5 WHERE rowid % 3 = 0"],
    "blob": [f"UPDATE {CALLS} SET eventClass = x'43' WHERE rowid % 2 = 0"],
    "text column": _relaxed("TEXT", "CASE eventClass WHEN 0 THEN 'runtime' ELSE '67' END"),
}


@pytest.mark.parametrize("case", list(HOSTILE_CLASSES))
def test_an_event_class_that_is_no_whole_number_is_no_backtrace(tmp_path, case):
    path = craft(tmp_path / "cls.sqlite", *HOSTILE_CLASSES[case])
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    ((calls,),) = raw(path, f"SELECT count(*) FROM {CALLS} WHERE NOT coalesce({BACKTRACE}, 0)")
    ((odd,),) = raw(path, f"SELECT count(*) FROM {CALLS} WHERE typeof(eventClass) <> 'integer'")
    assert odd > 0 and calls == raw(path, f"SELECT count(*) FROM {CALLS}")[0][0]  # no row is a backtrace
    res = _cli("api", "-f", "json", path)
    assert res.exit_code == 0, res.output
    assert sum(r["count"] for r in json.loads(res.stdout)) == calls
    res = _cli("info", "-f", "json", path)
    assert res.exit_code == 0 and "CUDA backtrace" not in res.stdout, res.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_ranks_refuses_in_one_line(tmp_path):
    # no NVTX range: no loop, so no rank has iterations to compare
    path = craft(tmp_path / "no_nvtx.sqlite", "DELETE FROM NVTX_EVENTS")
    for fmt in ([], ["-f", "json"]):
        res = _cli("ranks", *fmt, path)
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and "no rank has iterations" in lines[0], lines


def test_ranks_of_a_good_file_still_says_its_numbering_and_rule():
    res = _cli("ranks", fixture("train_small"))
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("nsysql: 1 rank;") and lines[1].startswith("nsysql: straggler rule:"), lines
