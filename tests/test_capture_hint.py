"""Where summary's `meanwhile` line finds nothing traced elsewhere, it says which capture would have shown what
the CPU ran (advice.cpu_capture_hint); where the export holds CPU samples and scheduling events, it says what the
CPU did instead (cpu.story)."""

from __future__ import annotations

import sqlite3

from conftest import fixture, loaded


def _meanwhile(path) -> str:
    facts = loaded(str(path)).summary()["facts"]
    row = facts.filter(facts["key"] == "meanwhile")
    assert row.height == 1, facts
    return row["value"][0]


def _rows(path, table: str) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.OperationalError:  # no such table
        return 0
    finally:
        con.close()


def test_without_cpu_samples_the_switch_is_named():
    path = fixture("train_small")  # recorded with -s none --cpuctxsw=none
    assert _rows(path, "COMPOSITE_EVENTS") == 0 and _rows(path, "SCHED_EVENTS") == 0
    text = _meanwhile(path)
    assert "nothing traced elsewhere explains it" in text
    assert "`nsys profile -s process-tree --cpuctxsw=process-tree" in text and "would record what the CPU ran" in text


def test_with_cpu_samples_the_cpu_evidence_is_said():
    path = fixture("loader_cpu_before")  # recorded with -s process-tree --cpuctxsw=process-tree
    assert _rows(path, "COMPOSITE_EVENTS") > 0 and _rows(path, "SCHED_EVENTS") > 0
    text = _meanwhile(path)
    assert "nothing traced elsewhere explains it" not in text and "the main thread waited in" in text
    assert "nsys profile -s process-tree" not in text
