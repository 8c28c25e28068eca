"""The CPU activity tables (cpu_samples, cpu_stack_frames, thread_states, thread_roles) against the raw rows of
every export that carries CPU samples or scheduling events: counts taken directly from the SQLite file."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import fixture, h200_exports, loaded, own_exports, public_exports


def _count(path, sql) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # the table is absent
        return []
    finally:
        con.close()


def _with(table: str) -> list:
    out = []
    for p in own_exports() + h200_exports() + public_exports():
        n = _count(p, f"SELECT count(*) FROM {table}")
        if n and n[0][0]:
            out.append(pytest.param(p, id=p.stem))
    return out


@pytest.mark.parametrize("path", _with("COMPOSITE_EVENTS"))
def test_samples_per_thread_equal_the_raw_rows(path):
    raw = _count(
        path,
        "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, count(*) FROM COMPOSITE_EVENTS GROUP BY 1, 2",
    )
    frames = _count(
        path,
        "SELECT (e.globalTid >> 24) & 16777215, e.globalTid & 16777215, count(*) FROM SAMPLING_CALLCHAINS c "
        "JOIN COMPOSITE_EVENTS e ON e.id = c.id GROUP BY 1, 2",
    )
    p = loaded(str(path))
    got = p.sql("SELECT pid, tid, count(*) FROM cpu_samples GROUP BY 1, 2").rows()
    assert sorted(got) == sorted(raw)
    # every frame of every sample, through the stacks the samples share
    got_frames = p.sql(
        "SELECT s.pid, s.tid, count(*) FROM cpu_samples s JOIN cpu_stack_frames f USING (stack_id) GROUP BY 1, 2"
    ).rows()
    assert sorted(got_frames) == sorted(frames)
    # the leaf is the frame at depth 0
    bad = p.sql(
        "SELECT count(*) FROM cpu_samples s JOIN cpu_stack_frames f ON f.stack_id = s.stack_id AND f.depth = 0 "
        "WHERE f.frame_id IS DISTINCT FROM s.leaf_frame_id"
    ).item()
    assert bad == 0


@pytest.mark.parametrize("path", _with("SCHED_EVENTS"))
def test_running_intervals_pair_the_raw_scheduling_events(path):
    # a `running` interval starts at each sched-in event that the same thread's next event (by time) takes off
    raw = _count(
        path,
        "SELECT count(*) FROM (SELECT isSchedIn, lead(isSchedIn) OVER (PARTITION BY globalTid ORDER BY start, "
        "isSchedIn) AS nxt FROM SCHED_EVENTS) WHERE isSchedIn <> 0 AND nxt = 0",
    )[0][0]
    got = loaded(str(path)).sql("SELECT count(*) FROM thread_states WHERE state = 'running'").item()
    assert got == raw


def test_roles_on_the_data_loader_fixture():
    p = loaded(str(fixture("loader_cpu_before")))
    roles = dict(
        ((pid, tid), (role, parent))
        for pid, tid, role, parent in p.sql("SELECT pid, tid, role, parent_pid FROM thread_roles").rows()
    )
    # by construction: the training process starts two DataLoader workers by fork; their threads are named
    # pt_data_worker; the loop runs on the process's own thread
    workers = _count(
        fixture("loader_cpu_before"),
        "SELECT DISTINCT (t.globalTid >> 24) & 16777215 FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
        "WHERE s.value = 'pt_data_worker'",
    )
    assert len(workers) == 2
    main = p.sql("SELECT pid, main_tid FROM process_roles").rows()[0]
    assert roles[main][0] == "main"
    for (w,) in workers:
        assert roles[(w, w)] == ("data_loader", main[0])
