"""Places where two of nsysql's answers about one export must agree: `cpu --by thread` and `--by process`,
`info` and the refusal of an analysis it says applies, the kernel tables' note on CUDA graphs traced whole in
every command that prints one, and `collectives` on one file and on several.

Known answers: the raw rows of the export counted here with sqlite3, or facts true by construction of the
fixtures (fixtures/*/COMMAND.md)."""

from __future__ import annotations

import io

import polars as pl
from click.testing import CliRunner
from conftest import craft, fixture, raw

from nsysql.cli import main

CPU = fixture("loader_cpu_before")


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _csv(*args) -> pl.DataFrame:
    res = cli(*args, "-f", "csv")
    assert res.exit_code == 0, res.output
    return pl.read_csv(io.StringIO(res.stdout))


# --- 1. cpu --by thread lists every thread with time on a CPU, and --by process counts the same threads ---------


def test_cpu_by_thread_lists_the_scheduled_threads_never_sampled():
    tid = "(globalTid >> 24) & 16777215, globalTid & 16777215"
    sampled = dict(((p, t), n) for p, t, n in raw(CPU, f"SELECT {tid}, count(*) FROM COMPOSITE_EVENTS GROUP BY 1, 2"))
    scheduled = set(raw(CPU, f"SELECT DISTINCT {tid} FROM SCHED_EVENTS"))
    assert scheduled - set(sampled)  # by construction: idle helper threads, scheduled but never sampled
    got = _csv("cpu", CPU, "--by", "thread")
    assert set(got.select("pid", "tid").rows()) == scheduled | set(sampled)
    for pid, tid_, n in got.select("pid", "tid", "samples").rows():
        assert n == sampled.get((pid, tid_), 0)
    assert got.filter(pl.col("samples") == 0)["top_function"].null_count() == got.filter(pl.col("samples") == 0).height
    procs = _csv("cpu", CPU, "--by", "process")
    per = got.group_by("pid").agg(pl.len().alias("n"), pl.col("on_cpu_ns").sum(), pl.col("samples").sum())
    both = procs.join(per, on="pid")
    assert both.height == procs.height == per.height
    assert both["threads"].to_list() == both["n"].to_list()
    assert both["on_cpu_ns"].to_list() == both["on_cpu_ns_right"].to_list()
    assert both["samples"].to_list() == both["samples_right"].to_list()


# --- 2. why_not("cpu") agrees with info where scheduling events alone answer per thread ---------------------------


def test_why_not_cpu_agrees_with_info_on_scheduling_events_alone(tmp_path):
    import nsysql

    path = craft(
        tmp_path / "unsampled.sqlite",
        "DELETE FROM COMPOSITE_EVENTS",
        "DELETE FROM SAMPLING_CALLCHAINS",
        source="loader_cpu_before",
    )
    assert raw(path, "SELECT count(*) FROM SCHED_EVENTS")[0][0] > 0
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    try:
        said = dict(prof.info().filter(pl.col("section") == "analyses").select("item", "value").rows())
        assert said["cpu"].startswith("yes: per thread and process only")
        assert prof.why_not("cpu") == ""
        assert prof.cpu(by="thread").height == len(raw(path, "SELECT DISTINCT globalTid FROM SCHED_EVENTS"))
    finally:
        prof.close()
    # a `by` that needs samples still refuses in one line, and says which `by`s scheduling answers
    res = cli("--cache-dir", tmp_path / "cache", "cpu", path, "--by", "function")
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "`--by thread` or `--by process`" in res.output


def test_why_not_cpu_still_refuses_without_samples_or_scheduling():
    import nsysql

    prof = nsysql.load(fixture("train_small"))
    try:
        assert not raw(fixture("train_small"), "SELECT name FROM sqlite_master WHERE name = 'SCHED_EVENTS'")
        assert prof.why_not("cpu").startswith("no CPU samples")
    finally:
        prof.close()
