"""Profile.diff and `nsysql diff`: known answers on real before/after profiles."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, h200, loaded

import nsysql
from nsysql.cli import main
from nsysql.errors import NsysqlError


def _diff(a, b):
    return loaded(str(a)).diff(loaded(str(b)))


def test_same_workload_no_significant_change():
    res = _diff(h200("train_osrt.sqlite"), h200("train_cudanvtx.sqlite"))
    mean = res.iteration_time.filter(pl.col("metric") == "iteration time, mean").row(0, named=True)
    assert mean["significant"] is False
    assert abs(mean["delta"]) < mean["noise"]
    assert res.headline.startswith("no significant change in mean iteration time")


def test_loop_fix_names_cause_and_faster_mean():
    res = _diff(fixture("loop_before"), fixture("loop_after"))
    it = res.iteration_time
    mean = it.filter(pl.col("metric") == "iteration time, mean").row(0, named=True)
    median = it.filter(pl.col("metric") == "iteration time, median").row(0, named=True)
    assert mean["new"] < mean["base"] and -45 < mean["delta_pct"] < -30  # 6.61 -> 4.09 ms
    assert median["significant"] is False and abs(median["delta_pct"]) < 3  # the typical step is unchanged
    idle = res.idle.row(0, named=True)
    assert idle["cause"] == "host:batch_to_device" and idle["delta_ns"] < -2e6  # ~25 ms every 10th step
    v = dict(res.notes.iter_rows())
    assert "host:batch_to_device" in v["largest idle cause change"]
    # three stalls every 10th step (9, 19, 29) are too few to claim a period: at least four (iterations.py)
    assert (
        "iterations 9, 19, 29 are" in v["slow iterations"]
        and "also slow: 18 (" in v["slow iterations"]
        and "every" not in v["slow iterations"]
    )
    assert res.mean_change_pct < 0


def test_ordering_and_status():
    res = _diff(fixture("train_small"), fixture("loop_after"))  # different programs: names differ
    for key in ("ranges", "kernels"):
        df = getattr(res, key)
        d = df["delta_ns"].abs().to_list()
        assert d == sorted(d, reverse=True)
        assert set(df["status"]) >= {"new", "vanished"}
    r = res.ranges
    assert r.filter(pl.col("name") == "Load data")["status"][0] == "vanished"
    assert r.filter(pl.col("name") == "forward")["status"][0] == "new"


def test_fail_above_is_a_parameter_of_the_diff():
    """The limit is diff's declared parameter: the answer says whether NEW breaks it and the exit status that
    follows, the library names the argument (`fail_above`), the command line its flag."""
    before, after = loaded(str(fixture("loop_before"))), loaded(str(fixture("loop_after")))
    pct = before.diff(after).mean_change_pct  # by construction (COMMAND.md): the fix makes the loop faster
    assert pct < 0
    held = before.diff(after, fail_above=pct + 1)
    assert (held.over_limit, held.exit_status) == (None, 0)
    broken = before.diff(after, fail_above=pct - 1)
    assert broken.exit_status == 1 and f"{pct:+.1f}% vs BASE (above `fail_above` {pct - 1:g}%" in broken.over_limit
    with pytest.raises(NsysqlError) as e:
        before.diff(after, fail_above=float("nan"))
    assert str(e.value) == "`fail_above` must be a finite percentage, not nan"
    r = CliRunner().invoke(main, ["diff", str(before.path), str(after.path), "--fail-above", str(pct - 1)])
    assert r.exit_code == 1 and f"(above --fail-above {pct - 1:g}%" in r.stderr
    r = CliRunner().invoke(main, ["diff", str(before.path), str(after.path), "--fail-above", "nan"])
    assert (r.exit_code, r.stderr) == (2, "nsysql: error: --fail-above must be a finite percentage, not nan\n")


def test_fail_above_cli():
    before, after = str(fixture("loop_before")), str(fixture("loop_after"))
    ok = CliRunner().invoke(main, ["diff", before, after, "--fail-above", "5"])
    assert ok.exit_code == 0, ok.output
    assert "host:batch_to_device" in ok.stdout
    bad = CliRunner().invoke(main, ["diff", after, before, "--fail-above", "5"])
    assert bad.exit_code == 1
    assert "above --fail-above 5%" in bad.stderr


def test_diff_markdown_and_json():
    r = CliRunner().invoke(main, ["diff", str(fixture("loop_before")), str(fixture("loop_after")), "-f", "json"])
    assert r.exit_code == 0
    import json

    j = json.loads(r.stdout)
    assert set(j) == {"verdict", "iteration time", "idle by cause", "idle activity elsewhere", "ranges", "kernels"}
    m = CliRunner().invoke(
        main, ["report", str(fixture("loop_after")), "--baseline", str(fixture("loop_before")), "-f", "markdown"]
    )
    assert m.exit_code == 0 and "#### nsysql diff: `loop_before.sqlite` → `loop_after.sqlite`" in m.stdout


def test_profiles_of_different_programs_are_flagged():
    """train_small (a PyTorch MLP) against graph_node (a CUDA-graph loop): almost none of the MLP's kernel time
    is in kernels the other runs. loop_before/loop_after run the same kernels: no such warning."""

    def warnings(a, b):
        v = _diff(a, b).notes
        return v.filter(pl.col("item") == "warning")["value"].to_list()

    assert any("same program" in w for w in warnings(fixture("train_small"), h200("graph_node.sqlite")))
    assert not any("same program" in w for w in warnings(fixture("loop_before"), fixture("loop_after")))


def test_without_iterations_totals_are_each_profiles_kernel_totals():
    """p4arth's sandbox has no NVTX loop: the diff compares whole-profile totals, which are each profile's own
    kernels answer, and judges none of them (no spread to judge by)."""
    sandbox = PUBLIC / "p4arth__cuda-perf-sandbox__report1.sqlite"
    if not sandbox.exists():
        pytest.skip(f"{sandbox} not present")
    base, new = loaded(str(h200("syncmem.sqlite"))), loaded(str(sandbox))
    res = base.diff(new)
    assert res.headline.startswith("no iteration-time verdict")
    assert res.iteration_time is None and "iteration time" not in res.to_frames()
    k = res.kernels
    assert k["significant"].null_count() == k.height
    for prof, col, gone in ((base, "base_ns", "new"), (new, "new_ns", "vanished")):
        own = dict(prof.kernels().select("name", "total_ns").iter_rows())
        mine = k.filter(pl.col("status") != gone)
        assert dict(zip(mine["name"], mine[col])) == {n: float(t) for n, t in own.items()}


def test_markdown_snippet_keeps_every_verdict_line():
    """The diff snippet lists the verdict's lines as the CLI table does: both warnings of two different programs
    (the iteration ranges differ, and few kernels are shared), not only the last line of each label."""
    import json

    from nsysql.render import code

    base, new = str(fixture("train_small")), str(fixture("loop_after"))
    table = CliRunner().invoke(main, ["diff", base, new, "-f", "json"])
    warnings = [r["value"] for r in json.loads(table.stdout)["verdict"] if r["item"] == "warning"]
    assert len(warnings) == 2 and "`Batch`" in warnings[0] and "same program" in warnings[1]
    md = CliRunner().invoke(main, ["report", new, "--baseline", base, "-f", "markdown"])
    assert md.exit_code == 0
    assert [line for line in md.stdout.splitlines() if line.startswith("- **warning**")] == [
        f"- **warning**: {code(w)}"
        for w in warnings  # quoting names of the export: a code span
    ]


def test_diff_says_which_part_of_the_step_changed():
    """Each part of the step (iterations' compute, exposed communication, copy only; idle) is compared per
    steady-state iteration, and the verdict names the part that moved most."""
    base, new = loaded(str(fixture("loop_before"))), loaded(str(fixture("loop_after")))
    res = base.diff(new)
    it = {r["metric"]: r for r in res.iteration_time.iter_rows(named=True)}
    cols = {"compute": "compute_ns", "exposed communication": "exposed_comm_ns", "copy only": "copy_ns"}
    cols["GPU idle"] = "idle_ns"
    deltas = {}
    for label, col in cols.items():
        row = it[f"{label} in an iteration, mean"]
        b, n = (p.iterations().filter(~pl.col("warmup"))[col].mean() / 1e6 for p in (base, new))
        assert row["base"] == pytest.approx(b) and row["new"] == pytest.approx(n)
        deltas[label] = n - b
    top = max(deltas, key=lambda k: abs(deltas[k]))
    assert dict(res.verdict().iter_rows())["largest part change"].startswith(f"{top}: ")


# every table of train_small that holds times: each time x 20 makes every length of time 20 times as long
_TIMED = ("PROFILER_OVERHEAD", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY")
_TIMED += ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "OSRT_API")


def test_diff_separates_thousands_in_its_sentences(tmp_path):
    """train_small against itself with every time x 20: each iteration takes 20 times as long, +1,900.0% by
    construction, said with its thousands separated as every figure nsysql prints (it said "+1900.0%")."""
    slow = craft(
        tmp_path / "slow.sqlite",
        *[f'UPDATE {t} SET start = start * 20, "end" = "end" * 20' for t in _TIMED],
        "UPDATE DIAGNOSTIC_EVENT SET timestamp = timestamp * 20",
    )
    with nsysql.load(slow, cache_dir=tmp_path / "c") as new:
        res = loaded(str(fixture("train_small"))).diff(new)
    assert "(+1,900.0%), beyond the noise threshold" in res.headline, res.headline
    median = res.notes.filter(pl.col("item") == "median")["value"][0]
    assert "ms (+1,900.0%), significant" in median, median


def test_a_kernel_that_took_no_time_still_ran(tmp_path):
    """train_small with every kernel ending as it starts (0 ns each, as a short one rounds): the kernels ran,
    all 632 of them, so the diff compares them; it warned that the profile "holds no kernel", deciding by time."""
    zero = craft(tmp_path / "zero.sqlite", 'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start')
    with nsysql.load(zero, cache_dir=tmp_path / "c") as new:
        res = loaded(str(fixture("train_small"))).diff(new)
    kernels = res.kernels.filter(~pl.col("name").str.starts_with("["))
    assert kernels.height and set(kernels["status"]) == {"both"} and kernels["new_ns"].sum() == 0
    warnings = res.notes.filter(pl.col("item") == "warning")["value"].to_list()
    assert not any("no kernel" in w or "kernels both run" in w for w in warnings), warnings
