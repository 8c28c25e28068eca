"""`nsysql cpu` and Profile.cpu(): where CPU time went, checked against the raw rows of the export."""

from __future__ import annotations

import io
import sqlite3

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import craft, fixture, raw

from nsysql.cli import main

BEFORE = fixture("loader_cpu_before")


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _step(n: int) -> tuple[int, int]:
    """The instance of NVTX range `train step <n>` in the raw rows."""
    return raw(
        BEFORE,
        'SELECT n.start, n."end" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId '
        "WHERE coalesce(n.text, s.value) = ?",
        f"train step {n}",
    )[0]


def test_samples_per_thread_equal_the_raw_rows():
    res = run(["cpu", BEFORE, "--by", "thread", "-f", "csv"])
    assert res.exit_code == 0, res.output
    # threads on a CPU but never sampled are listed too, with 0 samples (test_loose_ends.py checks them)
    got = pl.read_csv(io.StringIO(res.stdout)).filter(pl.col("samples") > 0)
    want = raw(
        BEFORE,
        "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, count(*) FROM COMPOSITE_EVENTS GROUP BY 1, 2",
    )
    assert sorted(got.select("pid", "tid", "samples").rows()) == sorted(want)
    assert abs(got["pct"].sum() - 100.0) < 0.01


def test_during_one_iteration_counts_the_samples_in_its_window():
    # iteration 7 is the slow step of the first large batch: the workers transform it meanwhile (COMMAND.md)
    a, b = _step(7)
    res = run(["cpu", BEFORE, "--during", "iterations 7:7", "--by", "process", "-f", "csv"])
    assert res.exit_code == 0, res.output
    got = pl.read_csv(io.StringIO(res.stdout))
    want = raw(
        BEFORE,
        "SELECT (globalTid >> 24) & 16777215, count(*) FROM COMPOSITE_EVENTS WHERE start >= ? AND start < ? GROUP BY 1",
        a,
        b,
    )
    assert sorted(got.select("pid", "samples").rows()) == sorted(want)
    # by construction the data-loader workers hold most of them, in at::native CPU kernels
    loader = got.filter(pl.col("role") == "data_loader")["samples"].sum()
    assert loader > 0.5 * got["samples"].sum()


def test_functions_are_named_without_templates():
    got = run(["cpu", BEFORE, "--during", "range train step", "-f", "csv"])
    assert got.exit_code == 0, got.output
    df = pl.read_csv(io.StringIO(got.stdout))
    names = set(df["function"].to_list())
    # the transforms' kernels (COMMAND.md: aminmax, index, mul, add, remainder), each named by the kernel
    assert {"at::native::aminmax_kernel", "at::native::index_kernel", "at::native::remainder_kernel"} <= names
    assert not any("<" in n for n in names)


def test_during_a_range_of_nothing_reads_the_ranges_without_a_name(tmp_path):
    """`--during ''` (and `range ''`) reads during the NVTX ranges without a name, as `--range ''` selects them
    everywhere: here loader_cpu_before's `train step N` ranges pushed without a message, so the samples counted
    are those taken during its steps, as `range train step` counts them on the fixture itself."""
    steps = "UPDATE NVTX_EVENTS SET text = NULL WHERE text LIKE 'train step%'"
    path = craft(tmp_path / "nameless_steps.sqlite", steps, source="loader_cpu_before")
    cache = tmp_path / "cache"
    want = run(["cpu", BEFORE, "--during", "range train step", "--by", "thread", "-f", "csv"])
    assert want.exit_code == 0, want.output
    for during in ("", "range ''", 'range ""'):
        got = run(["--cache-dir", cache, "cpu", path, "--during", during, "--by", "thread", "-f", "csv"])
        assert got.exit_code == 0, (during, got.output)
        assert got.stdout == want.stdout, during


def test_folded_stacks_count_every_sample_and_every_frame():
    res = run(["cpu", BEFORE, "-f", "folded"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    assert sum(counts) == raw(BEFORE, "SELECT count(*) FROM COMPOSITE_EVENTS")[0][0]
    # frames per sample: each line's frames times its samples add up to the raw callchain rows
    frames = sum(len(line.rsplit(" ", 1)[0].split(";")) * n for line, n in zip(lines, counts))
    assert frames == raw(BEFORE, "SELECT count(*) FROM SAMPLING_CALLCHAINS")[0][0]


def test_no_samples_says_which_switch_records_them():
    res = CliRunner().invoke(main, ["cpu", str(fixture("train_small"))])
    assert res.exit_code == 2
    assert "-s process-tree" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output


def test_bad_during_is_one_line():
    res = CliRunner().invoke(main, ["cpu", str(BEFORE), "--during", "yesterday"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1


def _sampled():
    from conftest import h200_exports, own_exports, public_exports

    out = []
    for p in own_exports() + h200_exports() + public_exports():
        try:
            n = raw(p, "SELECT count(*) FROM COMPOSITE_EVENTS")[0][0]
        except sqlite3.OperationalError:
            continue
        if n:
            out.append(pytest.param(p, id=p.stem[:40]))
    return out


@pytest.mark.parametrize("path", _sampled())
def test_every_cpu_command_on_every_export_with_samples(path):
    # always an answer where there are samples
    for args in (["cpu"], ["cpu", "--by", "thread"], ["cpu", "--by", "process"], ["cpu", "-f", "folded"]):
        res = CliRunner().invoke(main, [args[0], str(path), *args[1:]])
        assert res.exit_code == 0, (args, res.stderr)
    # an answer, or one line saying why it does not apply (no GPU gaps, no Python samples)
    for args in (["cpu", "--during", "gaps"], ["cpu", "--by", "python"], ["gaps", "--by", "cause", "--explain"]):
        res = CliRunner().invoke(main, [args[0], str(path), *args[1:]])
        assert res.exit_code in (0, 2) and "Traceback" not in res.output, (args, res.output)
        if res.exit_code == 2:
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr
