"""What `kernels --by category` (per iteration, per range), its category and tensor_cores columns say, checked
against the raw rows of real exports (read here with sqlite3) and facts true by construction of crafted copies of
the fixtures."""

from __future__ import annotations

from conftest import craft, h200, raw


def _cli(*args):
    from click.testing import CliRunner

    from nsysql.cli import main

    return CliRunner().invoke(main, list(map(str, args)))


def _one_line_refusal(r, path) -> str:
    """The refusal's one line (exit 2, no traceback), which names the file."""
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], r.output
    return lines[0]


def test_per_range_without_nvtx_says_there_is_no_range(tmp_path):
    """train_small without its NVTX rows has kernels and no range: `--per range` printed `no kernels` and exit 0,
    false of a profile with 1,000 kernels. It now refuses in one line, saying there is no NVTX range."""
    path = craft(tmp_path / "no_nvtx.sqlite", "DROP TABLE NVTX_EVENTS")
    assert raw(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] > 0
    line = _one_line_refusal(_cli("kernels", "--by", "category", "--per", "range", path), path)
    assert "no NVTX ranges in this profile" in line and "-t nvtx" in line


def test_per_range_with_no_kernel_inside_a_range_says_so(tmp_path):
    """Only the ranges that end before the first kernel launch call: none encloses a kernel. `no kernels` was
    false; the line now says that every kernel ran outside the ranges."""
    first_launch = "(SELECT min(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k USING (correlationId))"
    path = craft(
        tmp_path / "early_ranges.sqlite", f"DELETE FROM NVTX_EVENTS WHERE end IS NULL OR end >= {first_launch}"
    )
    assert raw(path, "SELECT count(*) FROM NVTX_EVENTS WHERE end IS NOT NULL")[0][0] > 0
    line = _one_line_refusal(_cli("kernels", "--by", "category", "--per", "range", path), path)
    assert "no kernel was launched inside an NVTX range" in line


def test_per_iteration_of_whole_graphs_names_the_graphs():
    """graph_whole's loop replays CUDA graphs traced whole (--cuda-graph-trace=graph): its iterations hold graph
    launches and no kernel row. `--per iteration` printed `no kernels`; it now says how many graph launches (the
    raw CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows, all inside the loop) hid their kernels and how to record them."""
    path = h200("graph_whole.sqlite")
    (graphs, graph_ns) = raw(path, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")[0]
    line = _one_line_refusal(_cli("kernels", "--by", "category", "--per", "iteration", path), path)
    assert f"{graphs:,} CUDA graph launches traced whole" in line
    assert f"({graph_ns / 1e6:.3g} ms of GPU time)" in line
    assert "--cuda-graph-trace=node" in line
