"""Places where two of nsysql's answers about one export must agree: `cpu --by thread` and `--by process`,
`info` and the refusal of an analysis it says applies, the kernel tables' note on CUDA graphs traced whole in
every command that prints one, and `collectives` on one file and on several.

Known answers: the raw rows of the export counted here with sqlite3, or facts true by construction of the
fixtures (fixtures/*/COMMAND.md)."""

from __future__ import annotations

import io

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import built_cache, craft, fixture, raw, seeded

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
    seeded(CPU)  # the run's one entry of the export, which the commands read (the cold build is tested elsewhere)
    got = _csv("cpu", CPU, "--by", "thread")
    assert set(got.select("pid", "tid").rows()) == scheduled | set(sampled)
    for pid, tid_, n in got.select("pid", "tid", "samples").rows():
        assert n == sampled.get((pid, tid_), 0)
    assert got.filter(pl.col("samples") == 0)["top_function"].null_count() == got.filter(pl.col("samples") == 0).height
    # each thread's time on a CPU is the raw scheduling sum (test_cpu_sched._on_cpu), sampled or not
    from test_cpu_sched import _on_cpu

    on = _on_cpu(CPU)
    assert {(p, t): ns for p, t, ns in got.select("pid", "tid", "on_cpu_ns").rows() if ns} == on
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
        said = dict(prof.info().filter(pl.col("section") == "commands").select("item", "value").rows())
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

    seeded(fixture("train_small"))
    prof = nsysql.load(fixture("train_small"))
    try:
        assert not raw(fixture("train_small"), "SELECT name FROM sqlite_master WHERE name = 'SCHED_EVENTS'")
        assert prof.why_not("cpu").startswith("no CPU samples")
    finally:
        prof.close()


# --- 3. the note on CUDA graphs traced whole, in every command that prints a kernel table -------------------------


def _whole(tmp_path, outer: bool = False):
    """graph_loop as `--cuda-graph-trace=graph` records it (test_graphs_said.whole_graphs_of); `outer`: with one
    more NVTX range, `train`, on the thread of the `step` ranges and around all of them."""
    import sqlite3

    from test_graphs_said import whole_graphs_of

    path = whole_graphs_of(tmp_path)
    if outer:
        con = sqlite3.connect(path)
        cols = [r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")]
        row = dict(
            zip(
                cols,
                con.execute(
                    "SELECT * FROM NVTX_EVENTS WHERE text = 'step 0' OR textId IN (SELECT id FROM StringIds WHERE value = 'step 0')"
                ).fetchone(),
            )
        )
        a, b = con.execute(
            'SELECT min(n.start) - 1, max(n."end") + 1 FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId '
            "WHERE coalesce(n.text, s.value) LIKE 'step %'"
        ).fetchone()
        row.update(start=a, end=b, text="train", textId=None)
        con.execute(f"INSERT INTO NVTX_EVENTS VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])
        con.commit()
        con.close()
    return path


def _graph_launches(path) -> tuple[int, int]:
    return raw(path, 'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE')[0]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """_whole, made once for the two tests that read it as it is: each reads a cache of its own holding the entry
    a first load of it builds, built once in the run (conftest.built_cache)."""
    return _whole(tmp_path_factory.mktemp("whole"))


def test_summary_says_under_its_kernels_what_they_leave_out(tmp_path, whole):
    path = whole
    n, _ = _graph_launches(path)
    head = f"not in this table: {n} CUDA graph launches traced whole ("
    built_cache(tmp_path / "c", path, fixture("graph_loop"))
    res = cli("--cache-dir", tmp_path / "c", "summary", path, "--wide")
    assert res.exit_code == 0, res.output
    kernels = res.stdout.split("== kernels ==", 1)[1].split("== ranges ==")[0]
    assert head in kernels and res.stdout.count(head) == 1
    md = cli("--cache-dir", tmp_path / "c", "summary", path, "-f", "markdown").stdout
    assert md.count(f"_{head}") == 1
    facts = json_facts = cli("--cache-dir", tmp_path / "c", "summary", path, "-f", "json").stdout
    assert json_facts.count(head) == 1 and '"item": "kernels"' in facts
    # nothing said where the kernels are all recorded
    plain = cli("--cache-dir", tmp_path / "c", "summary", fixture("graph_loop")).stdout
    assert "traced whole" not in plain


def test_kernels_of_several_files_say_each_ranks_note(tmp_path, whole):
    path = whole
    n, _ = _graph_launches(path)
    built_cache(tmp_path / "c", path, fixture("graph_loop"))
    res = cli("--cache-dir", tmp_path / "c", "kernels", path, fixture("graph_loop"), "--wide")
    assert res.exit_code == 0, res.output
    assert f" (whole.sqlite): not in this table: {n} CUDA graph launches traced whole (" in res.stdout
    assert "(graph_loop.sqlite)" not in res.stdout
    csv = cli("--cache-dir", tmp_path / "c", "kernels", path, fixture("graph_loop"), "-f", "csv").stdout
    assert "traced whole" not in csv


def test_kernels_by_range_innermost_counts_a_launch_in_its_innermost_range(tmp_path):
    path = _whole(tmp_path, outer=True)
    n, _ = _graph_launches(path)
    every = cli("--cache-dir", tmp_path / "c", "kernels-by-range", path, "--wide").stdout
    inner = cli("--cache-dir", tmp_path / "c", "kernels-by-range", path, "--wide", "--innermost").stdout
    # every launch is inside `train` and one `step i`: all of them in `train`, none there with --innermost
    assert f"(`train`: {n} CUDA graph launches, " in every
    assert "`train`" not in inner and "`step " in inner


# --- 4. collectives over several exports without NCCL payloads answers per rank as one file does ----------------

PAIR = [fixture("ddp_pair").parent / f"rank{i}.sqlite" for i in (0, 1)]


def _nccl_kinds(path) -> dict[str, tuple[int, int]]:
    """Per collective kind, the NCCL kernels (count, summed GPU ns), counted in the export by their names."""
    rows = raw(
        path,
        'SELECT s.value, k."end" - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName '
        "WHERE s.value LIKE 'nccl%'",
    )
    out: dict[str, list[int]] = {}
    for name, ns in rows:
        kind = next(k for k in ("AllReduce", "Broadcast", "AllGather", "ReduceScatter", "SendRecv") if k in name)
        out.setdefault(kind, []).append(ns)
    return {k: (len(v), sum(v)) for k, v in out.items()}


def test_collectives_of_several_unsized_exports_answer_per_rank(tmp_path):
    cache = ("--cache-dir", built_cache(tmp_path / "c", *PAIR))
    got = _csv(*cache, "collectives", *PAIR, "--by", "kind")
    ranks = {r: PAIR[i] for i, r in enumerate(sorted(got["rank"].unique().to_list()))}
    assert len(ranks) == 2
    for rank, path in ranks.items():
        mine = got.filter(pl.col("rank") == rank)
        assert {k: (n, ns) for k, n, ns in mine.select("kind", "kernels", "gpu_ns").rows()} == _nccl_kinds(path)
    # one file answers the same rows
    one = _csv(*cache, "collectives", PAIR[0], "--by", "kind")
    assert sorted(one.rows()) == sorted(got.filter(pl.col("rank") == 0).drop("rank").rows())
    res = cli(*cache, "collectives", *PAIR, "--wide")
    assert res.exit_code == 0, res.output
    for rank, path in ranks.items():
        assert f"rank {rank} ({path.name}): " in res.stdout and "NVTX payloads" in res.stdout
    # what needs the payloads refuses in one line naming every file without them
    res = cli(*cache, "collectives", *PAIR, "--by", "rank")
    assert res.exit_code != 0 and "Traceback" not in res.output
    line = res.output.strip().splitlines()[-1]
    assert all(p.name in line for p in PAIR) and "`--by kind`" in line


# --- 5. a link to an export is named as the user named it --------------------------------------------------------


def test_a_link_is_shown_as_the_user_named_it(tmp_path):
    """Profile.path, summary's `file` fact and info's `path` say the path the user gave (a link kept as the
    link, as `last_profile` keeps it), through the link and through its target, which share one cache entry
    (keyed by the file the link resolves to): neither is shown the other's path, warm or cold."""
    import nsysql

    target = fixture("train_small")
    link = tmp_path / "latest.sqlite"
    link.symlink_to(target)
    cache = built_cache(tmp_path / "cache", target)
    for path in (link, target, link):
        prof = nsysql.load(path, cache_dir=cache)
        try:
            assert prof.path == path
            facts = dict(prof.summary()["facts"].select("key", "value").rows())
            assert facts["file"] == str(path)
        finally:
            prof.close()
        for _ in range(2):  # the second run prints the text kept with the stored answer
            out = cli("--cache-dir", cache, "summary", path, "-f", "csv").stdout
            assert f"\nfile,{path}\n" in out, out
            info = _csv("--cache-dir", cache, "info", path)
            assert info.filter(pl.col("item") == "path")["value"].to_list() == [str(path)]
