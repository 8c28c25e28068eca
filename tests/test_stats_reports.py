"""`nsysql stats -r`: its report names derived from the declared commands, and nsys's report names as aliases of
the report of ours that answers the same question."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, fixture, h200, seeded

from nsysql.cli import main
from nsysql.cli.stats import aliases, reports

TRAIN = fixture("train_small")
REFERENCE = TRAIN.parent / "reference"


def run(args):
    return CliRunner().invoke(main, args)


def test_nsys_names_are_aliases_of_the_report_that_answers_the_same():
    assert aliases() == {
        "cuda_gpu_kern_sum": "kernels",
        "cuda_api_sum": "api",
        "cuda_kern_exec_sum": "launches",
        "nvtx_sum": "ranges",
        "nvtx_gpu_proj_sum": "ranges",
        "nvtx_kern_sum": "kernels-by-range",
    }
    # every command that prints one declared analysis' frame is a report, each other --by choice one more
    assert {"kernels", "api", "ranges", "kernels-by-range", "iterations", "gaps", "gaps-by-cause"} <= set(reports())
    assert reports()["kernels-by-category"] == ("kernels", {"by": "category"})


def test_each_alias_gives_the_same_csv_as_our_name(tmp_path):
    asked = sorted(set(aliases()) | set(aliases().values()))
    # given, --attribution holds for nsys's names too (without it they take nsys's rule: test_audit_outputs)
    res = run(["stats", str(TRAIN), "-r", ",".join(asked), "-o", str(tmp_path / "run"), "--attribution", "thread"])
    assert res.exit_code == 0, res.stderr
    for alias, ours in aliases().items():
        got = (tmp_path / f"run_{alias}.csv").read_bytes()
        assert got and got == (tmp_path / f"run_{ours.replace('-', '_')}.csv").read_bytes(), alias
    # and the alias' numbers are nsys's own report's (cuda_gpu_kern_sum, as nsys stats wrote it)
    ours = pl.read_csv(tmp_path / "run_cuda_gpu_kern_sum.csv")
    want = pl.read_csv(REFERENCE / "train_small_cuda_gpu_kern_sum.csv")
    assert sorted(ours["total_ns"].to_list()) == sorted(want["Total Time (ns)"].to_list())


def test_an_nsys_report_with_no_counterpart_is_one_line(tmp_path):
    res = run(["stats", str(TRAIN), "-r", "osrt_sum,cuda_api_sum", "-o", str(tmp_path / "run")])
    assert res.exit_code == 0, res.stderr
    said = [line for line in res.stderr.splitlines() if "osrt_sum" in line]
    assert len(said) == 1 and said[0].startswith("nsysql: osrt_sum: nsys's report has no counterpart"), res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_cuda_api_sum.csv"]
    alone = run(["stats", str(TRAIN), "-r", "cuda_gpu_mem_time_sum"])
    assert alone.exit_code == 2 and alone.stderr.splitlines()[-1] == "nsysql: error: no report of nsysql's was asked"
    bad = run(["stats", str(TRAIN), "-r", "kernels,nope"])
    assert bad.exit_code == 2 and "unknown report 'nope'" in bad.stderr


def test_the_iterations_report_says_what_the_command_says_under_its_table(tmp_path):
    """`stats -r iterations` is the table `nsysql iterations` prints, and on stderr the lines it prints under it
    (the loop taken, the steady state with its trend, the outliers): grow_steps' step time grows with the
    iteration, which only those lines say."""
    path, cache = str(fixture("grow_steps")), ["--cache-dir", str(tmp_path / "c")]
    cmd = CliRunner().invoke(main, [*cache, "iterations", "-f", "csv", path])
    st = CliRunner().invoke(main, [*cache, "stats", "-r", "iterations", "-f", "csv", path])
    assert cmd.exit_code == 0 and st.exit_code == 0, st.output
    assert st.stdout.splitlines() == ["# iterations", *cmd.stdout.splitlines()]
    table = CliRunner().invoke(main, [*cache, "iterations", path])
    under = [line for line in table.stdout.splitlines() if line.startswith(("range: ", "steady state", "outliers: "))]
    assert len(under) == 3 and "step time grows steadily" in under[1]
    assert st.stderr.splitlines() == [f"nsysql: iterations: {line}" for line in under]


def test_the_kernel_reports_say_the_graphs_their_commands_say_under_their_tables():
    """graph_whole (h200: each `graph_step` replays a CUDA graph traced whole, 30 launches): `stats -r
    kernels,kernels-by-range` is the tables those commands write, and on stderr the line each prints under its
    table, naming the launches the table leaves out. A report of an export it does not apply to stays the empty
    table it was (nsys stats prints one too), though the command refuses it: poolformer holds no GPU work."""
    path, none = h200("graph_whole.sqlite"), PUBLIC / "YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite"
    if not none.exists():
        pytest.skip(f"{none} not present")
    seeded(path)
    st = run(["stats", "-r", "kernels,kernels-by-range", "-f", "csv", str(path)])
    assert st.exit_code == 0, st.output
    tables, said = [], []
    for cmd in ("kernels", "kernels-by-range"):
        tables += [f"# {cmd}", *run([cmd, "-f", "csv", str(path)]).stdout.splitlines(), ""]
        note = run([cmd, str(path)]).stdout.rstrip("\n").split("\n")[-1]
        assert note.startswith("not in this table: ") and "CUDA graph launches traced whole" in note
        said.append(f"nsysql: {cmd}: {note}")
    assert st.stdout.splitlines() == tables[:-1] and st.stderr.splitlines() == said
    seeded(none)
    st = run(["stats", "-r", "kernels,kernels-by-range", "-f", "csv", str(none)])
    assert st.exit_code == 0 and st.stderr == "" and run(["kernels", str(none)]).exit_code == 2
    assert [line for line in st.stdout.splitlines() if line and not line.startswith("#")] == [
        "name,count,total_ns,avg_ns,med_ns,min_ns,max_ns,stddev_ns,pct,category,tensor_cores",
        "range,domain,kernel,range_count,count,total_ns,avg_ns,med_ns,min_ns,max_ns,stddev_ns",
    ]
