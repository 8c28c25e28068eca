"""What the CPU did while the GPU waited, on the unannotated DataLoader pair (fixtures/loader_cpu_before and
loader_cpu_after, COMMAND.md): the workers transform every 8th batch on the CPU (before) or not at all (after);
only the loop has NVTX. Known answers come from the raw rows of the export."""

from __future__ import annotations

import polars as pl
from click.testing import CliRunner
from conftest import craft, fixture, loaded, raw

import nsysql
from nsysql.cli import main

BEFORE, AFTER = fixture("loader_cpu_before"), fixture("loader_cpu_after")
SLOW = (7, 15, 23, 31)  # the steps with the large images (COMMAND.md)


def _step(path, n):
    return raw(
        path,
        'SELECT n.start, n."end", (n.globalTid >> 24) & 16777215, n.globalTid & 16777215 FROM NVTX_EVENTS n '
        "LEFT JOIN StringIds s ON s.id = n.textId WHERE coalesce(n.text, s.value) = ?",
        f"train step {n}",
    )[0]


def _workers(path) -> set[int]:
    return {
        pid
        for (pid,) in raw(
            path,
            "SELECT DISTINCT (t.globalTid >> 24) & 16777215 FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
            "WHERE s.value = 'pt_data_worker'",
        )
    }


def _worker_threads(path) -> set[tuple[int, int]]:
    return set(
        raw(
            path,
            "SELECT (t.globalTid >> 24) & 16777215, t.globalTid & 16777215 FROM ThreadNames t "
            "JOIN StringIds s ON s.id = t.nameId WHERE s.value = 'pt_data_worker'",
        )
    )


def _running_ns(path, pids: set[int], a: int, b: int, threads=None) -> int:
    """Time the threads of `pids` (or only `threads`, (pid, tid) pairs) were on a CPU in [a, b): each sched-in
    paired with the thread's next event, when that is a sched-out, counted straight from SCHED_EVENTS."""
    rows = raw(path, "SELECT globalTid, start, isSchedIn FROM SCHED_EVENTS ORDER BY globalTid, start, isSchedIn")
    total = 0
    for (g, t, i), (g2, t2, i2) in zip(rows, rows[1:]):
        who = ((g >> 24) & 16777215, g & 16777215)
        if g == g2 and i and not i2 and who[0] in pids and (threads is None or who in threads):
            total += max(0, min(t2, b) - max(t, a))
    return total


def test_workers_are_on_the_cpu_during_the_slow_steps():
    p = loaded(str(BEFORE))
    workers = _workers(BEFORE)
    for n in SLOW:
        a, b, _, _ = _step(BEFORE, n)
        got = p.cpu(during=f"iterations {n}:{n}", by="process")
        on = got.filter(pl.col("role") == "data_loader")["on_cpu_ns"].sum()
        assert on == _running_ns(BEFORE, workers, a, b)
        # by construction the workers transform the large batch while the loop waits for it
        assert on >= 0.5 * (b - a), (n, on, b - a)


def _main_wait(path) -> str:
    """The OS call the loop's thread spent most of the slow steps in, from the raw rows."""
    per: dict[str, int] = {}
    for n in SLOW:
        a, b, pid, tid = _step(path, n)
        for name, s, e in raw(
            path,
            'SELECT s.value, o.start, o."end" FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId '
            'WHERE o.globalTid & 16777215 = ? AND (o.globalTid >> 24) & 16777215 = ? AND o.start < ? AND o."end" > ?',
            tid,
            pid,
            b,
            a,
        ):
            per[name] = per.get(name, 0) + min(e, b) - max(s, a)
    return max(per, key=per.get)


def test_summary_names_the_data_loader_from_cpu_evidence_alone():
    s = loaded(str(BEFORE)).summary()
    wait = _main_wait(BEFORE)
    found = s["findings"].filter(pl.col("finding") == "data-loader bound")
    assert found.height == 1
    ev = found["evidence"][0]
    assert f"the main thread waited in `{wait}`" in ev
    assert "2 data-loader worker processes (pt_data_worker) were on a CPU" in ev
    assert "`at::native::" in ev  # their top frames: the transforms' CPU kernels
    assert found["headroom_ms"][0] is not None
    meanwhile = s["facts"].filter(pl.col("key") == "meanwhile")["value"][0]
    assert ev.split("; meanwhile ", 1)[1] in meanwhile  # the same sentence


def test_the_slow_steps_finding_names_the_loader_they_waited_for():
    """The slow steps (7, 15, 23, 31) are slow because the loop waits for the large batches the workers transform
    (COMMAND.md): the headline finding says so, with the wait the raw rows show, not only that the time is spent
    outside the step's child ranges."""
    s = loaded(str(BEFORE)).summary()
    slow = s["findings"].filter(pl.col("finding") == "periodic slow iterations")
    assert slow.height == 1
    ev = slow["evidence"][0]
    assert "iterations 7, 15, 23, 31 (every 8th)" in ev
    assert "in those steps the GPU waited for the data loader" in ev
    assert f"the main thread waited in `{_main_wait(BEFORE)}`" in ev.split("waited for the data loader", 1)[1]
    assert "data-loader worker processes (pt_data_worker) were on a CPU" in ev
    # the workers' time on a CPU in those steps, by the raw rows, is what the sentence rests on
    workers = _workers(BEFORE)
    for n in SLOW:
        a, b, _, _ = _step(BEFORE, n)
        assert _running_ns(BEFORE, workers, a, b) >= 0.5 * (b - a)


def test_slow_steps_without_a_waiting_loader_name_none():
    """jitter_before was recorded without scheduling events (`-s none --cpuctxsw=none`, COMMAND.md): nothing
    measures what its threads did in the slow steps, so the slow-iteration finding names no data loader."""
    s = loaded(str(fixture("jitter_before"))).summary()
    ev = s["findings"].filter(pl.col("finding").str.contains("slow iterations"))["evidence"].to_list()
    assert ev and not any("data loader" in e for e in ev)


def test_after_the_fix_no_data_loader_finding():
    s = loaded(str(AFTER)).summary()
    assert "data-loader bound" not in s["findings"]["finding"].to_list()
    # by construction the workers only load: during the steps of the large batches they are on a CPU far less
    # than before, while the loop runs the transforms on the GPU
    workers = _workers(AFTER)
    for n in SLOW:
        a, b, _, _ = _step(AFTER, n)
        assert _running_ns(AFTER, workers, a, b) < 0.5 * (b - a)


def test_explain_rows_are_the_threads_time_in_each_gap():
    p = loaded(str(BEFORE))
    rows = p.gap_activity(top=None).filter(pl.col("kind") == "cpu")
    assert rows.height
    assert (rows["overlap_ns"] <= rows["duration_ns"]).all()
    gaps = p.gaps()
    # the wait for the large batches: the gaps of the slow steps whose cause is the step range itself
    slow = gaps.filter(pl.col("iteration").is_in(list(SLOW)) & (pl.col("cause") == "host:train step*"))
    slow = slow.sort("duration_ns", descending=True).unique("iteration", keep="first")
    assert slow.height == len(SLOW)
    workers = _workers(BEFORE)
    for g in slow.iter_rows(named=True):
        mine = rows.filter((pl.col("start_ns") == g["start_ns"]) & ~pl.col("waiting"))
        on = mine.filter(pl.col("pid").is_in(list(workers)))["overlap_ns"].sum()
        # nsys's own threads in the workers ([NSys]) are left out
        assert on == _running_ns(BEFORE, workers, g["start_ns"], g["end_ns"], _worker_threads(BEFORE))
        blocked = rows.filter((pl.col("start_ns") == g["start_ns"]) & pl.col("waiting"))
        assert blocked.sort("overlap_ns")["activity"][-1] == f"blocked in {_main_wait(BEFORE)}"


def test_diff_says_the_workers_cpu_time_went_away():
    res = CliRunner().invoke(main, ["diff", str(BEFORE), str(AFTER), "-f", "csv"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    d = loaded(str(BEFORE)).diff(loaded(str(AFTER)))
    act = d.activity.filter(pl.col("activity").str.starts_with("data_loader threads on a CPU"))
    assert act.height == 1
    r = act.row(0, named=True)
    assert r["significant"] and r["new_ns"] < 0.1 * r["base_ns"]


def test_explain_says_the_same_sentence_as_summary():
    res = CliRunner().invoke(
        main, ["gaps", str(BEFORE), "--by", "cause", "--explain", "--top", "2"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    facts = loaded(str(BEFORE)).summary()["facts"]
    meanwhile = facts.filter(pl.col("key") == "meanwhile")["value"][0]
    assert f"meanwhile: {meanwhile}\n" in res.stdout


def test_without_scheduling_events_explain_names_the_switch():
    path = fixture("train_small")  # recorded with --cpuctxsw=none
    assert raw(path, "SELECT count(*) FROM sqlite_master WHERE name = 'SCHED_EVENTS'")[0][0] == 0
    res = CliRunner().invoke(main, ["gaps", str(path), "--by", "cause", "--explain"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    want = (
        "time on a CPU: no scheduling events in this profile: record them with `nsys profile --cpuctxsw=process-tree`"
    )
    assert res.stdout.count(want) == 1


def test_report_says_the_same_sentence():
    res = CliRunner().invoke(main, ["report", str(BEFORE), "-f", "markdown"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    facts = loaded(str(BEFORE)).summary()["facts"]
    story = facts.filter(pl.col("key") == "meanwhile")["value"][0].split(": ", 1)[1]
    assert "**data-loader bound**" in res.stdout and story in res.stdout


def test_frames_without_symbols_are_said_as_unresolved_addresses(tmp_path):
    """Where nsys resolved no symbol of the sampled frames (an address is all it wrote, as in exports of stripped
    binaries and old nsys), the evidence says their share as unresolved addresses, never quoting an address as
    if it named a function: the workers' samples of the crafted copy are all such frames."""
    path = craft(
        tmp_path / "stripped.sqlite",
        "UPDATE StringIds SET value = printf('0x7f%010x', id) WHERE id IN (SELECT symbol FROM SAMPLING_CALLCHAINS)",
        source=BEFORE,
    )
    ev = nsysql.load(path).findings().filter(pl.col("finding") == "data-loader bound")["evidence"][0]
    workers = ev.split("2 data-loader worker processes (pt_data_worker) were on a CPU", 1)[1]
    assert "top frames unresolved addresses 100% (of " in workers
    assert "`0x7f" not in ev
