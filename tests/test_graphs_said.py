"""What nsysql says, and must not leave unsaid, about CUDA graphs traced whole, NCCL collectives without their
payloads, and two profiles of different programs compared.

Known answers: the raw rows of the export counted here with sqlite3, or facts true by construction of the
fixtures (fixtures/*/COMMAND.md)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, H200, SHARED, craft, fixture, seeded

from nsysql.cli import main

GRAPH_WHOLE = H200 / "graph_whole.sqlite"
GRAPH_NODE = H200 / "graph_node.sqlite"
NODE_HINT = "--cuda-graph-trace=node"
needs_h200 = pytest.mark.skipif(not GRAPH_WHOLE.exists(), reason="the h200 exports are absent")


def cli(*args) -> CliRunner:
    # a fixture or real export is read from the run's entry of it (built once in the run); a crafted one (under
    # tmp_path) from the entry the first command on it builds
    seeded(*(a for a in args if isinstance(a, Path) and any(a.resolve().is_relative_to(d) for d in (FIXTURES, SHARED))))
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


def graph_rows(path) -> tuple[int, int]:
    """(launches, total ns) of the CUDA graph launches traced whole, counted in the export."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute('SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE').fetchone()


def kernel_ns(path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute('SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0]


def launches_in(path, range_name: str) -> tuple[int, int]:
    """(launches, total ns) of the graph launches whose launch call ran inside an NVTX push/pop range named
    `range_name` on the same thread (nsys's rule), counted in the export."""
    sql = """
      SELECT DISTINCT g.rowid, g."end" - g.start
      FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g
      JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId
      JOIN NVTX_EVENTS n ON n.globalTid = r.globalTid AND n.start <= r.start AND n."end" >= r."end"
      LEFT JOIN StringIds s ON s.id = n.textId
      WHERE coalesce(n.text, s.value) = ?"""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        ids = con.execute(sql, (range_name,)).fetchall()
    return len(ids), sum(d for _, d in ids)


def ms(ns: int) -> str:
    return f"{ns / 1e6:.3g} ms"


def whole_graphs_of(tmp_path, half: bool = False):
    """graph_loop (30 replays of one captured graph, traced node by node: 360 kernels with a graphNodeId) as
    `--cuda-graph-trace=graph` records it: each replay one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row from its first
    node's start to its last node's end, and none of its kernels. `half`: only the first 15 replays."""
    keep = (
        "AND correlationId IN (SELECT DISTINCT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "WHERE graphNodeId IS NOT NULL ORDER BY correlationId LIMIT 15)"
        if half
        else ""
    )
    return craft(
        tmp_path / "whole.sqlite",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
        "correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE SELECT min(start), max(end), min(deviceId), min(contextId), "
        "NULL, min(streamId), correlationId, min(globalPid), 1, 1 FROM CUPTI_ACTIVITY_KIND_KERNEL "
        f"WHERE graphNodeId IS NOT NULL {keep} GROUP BY correlationId",
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN "
        "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE)",
        source="graph_loop",
    )


# --- 1. CUDA graphs traced whole: the kernel tables say what they leave out --------------------------------------


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """whole_graphs_of, made once for the tests here that read it whole (its entry then built once, by the first
    command on it)."""
    return whole_graphs_of(tmp_path_factory.mktemp("whole"))


def test_kernels_says_the_graph_time_it_leaves_out(whole):
    path = whole
    n, total = graph_rows(path)
    assert n == 30  # by construction: 30 replays
    share = 100.0 * total / (total + kernel_ns(path))
    out = cli("kernels", path).stdout
    note = out.rstrip("\n").split("\n")[-1]
    assert note.startswith(
        f"not in this table: 30 CUDA graph launches traced whole ({ms(total)} on the GPU, {share:.0f}%"
    )
    assert NODE_HINT in note
    md = cli("kernels", path, "-f", "markdown").stdout
    assert md.rstrip("\n").endswith(note)
    # CSV and JSON stay the table alone, as nsys stats writes it
    assert "traced whole" not in cli("kernels", path, "-f", "csv").stdout
    assert isinstance(json.loads(cli("kernels", path, "-f", "json").stdout), list)
    by_cat = cli("kernels", path, "--by", "category").stdout
    assert by_cat.rstrip("\n").split("\n")[-1] == note


def test_no_note_without_whole_graphs():
    for path in (fixture("graph_loop"), fixture("train_small")):
        for args in (["kernels"], ["kernels-by-range"], ["kernels", "--by", "category", "--per", "range"]):
            assert "traced whole" not in cli(args[0], path, *args[1:]).stdout
        assert "traced whole" not in cli("report", "-f", "markdown", path).stdout


def test_kernels_by_range_names_the_ranges_of_the_whole_graphs(whole):
    path = whole
    out = cli("kernels-by-range", path).stdout
    note = out.rstrip("\n").split("\n")[-1]
    assert note.startswith("not in this table: CUDA graph launches traced whole inside these ranges (")
    # by construction each `step <i>` range replays the graph once: each named range holds 1 launch
    named = re.findall(r"`(step \d+)`: (\d+) CUDA graph launch(?:es)?, ([\d.e+-]+) ms on the GPU", note)
    assert len(named) == 3 and "27 more ranges" in note
    for name, count, shown in named:
        assert (int(count), shown + " ms") == (1, ms(launches_in(path, name)[1]))
    # a --range that keeps none of them: nothing left out, nothing said
    assert "traced whole" not in cli("kernels-by-range", path, "--range", "warm-up").stdout
    per_range = cli("kernels", path, "--by", "category", "--per", "range").stdout
    assert per_range.rstrip("\n").split("\n")[-1] == note


def test_kernels_per_iteration_says_the_graphs_in_the_iterations(tmp_path):
    path = whole_graphs_of(tmp_path, half=True)
    n, total = graph_rows(path)
    assert n == 15
    out = cli("kernels", path, "--by", "category", "--per", "iteration").stdout
    note = out.rstrip("\n").split("\n")[-1]
    assert note.startswith(f"not in this table: 15 CUDA graph launches traced whole in the iterations ({ms(total)}")


def test_report_says_the_graph_time_under_its_kernels(whole, tmp_path):
    path = whole
    n, total = graph_rows(path)
    md = cli("report", "-f", "markdown", path).stdout
    assert f"_not in this table: {n} CUDA graph launches traced whole ({ms(total)} on the GPU" in md
    html = tmp_path / "r.html"
    cli("report", path, "-o", html)
    page = html.read_text()
    assert f"not in this chart: {n} CUDA graph launches traced whole ({ms(total)} on the GPU" in page
    assert "not in this table: CUDA graph launches traced whole inside these ranges (<code>step" in page


def test_ops_says_the_graph_time_it_leaves_out(tmp_path):
    """ops_mlp (PyTorch operator ranges, no CUDA graph) with its last 10 kernels recorded as whole-graph launches
    instead, as `--cuda-graph-trace=graph` records a replay: one span each, its kernels absent. `ops` credits
    operators with kernels only, and says what it leaves out as `kernels` does, in a table or Markdown."""
    path = craft(
        tmp_path / "ops_whole.sqlite",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId "
        "INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, "
        "correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL)",
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE SELECT start, end, deviceId, contextId, NULL, streamId, "
        "correlationId, globalPid, 1, 1 FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC LIMIT 10",
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN "
        "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE)",
        source="ops_mlp",
    )
    n, total = graph_rows(path)
    assert n == 10  # by construction
    share = 100.0 * total / (total + kernel_ns(path))
    out = cli("ops", path).stdout
    note = out.rstrip("\n").split("\n")[-1]
    assert note == cli("kernels", path).stdout.rstrip("\n").split("\n")[-1]  # the same note as under `kernels`
    assert note.startswith(
        f"not in this table: 10 CUDA graph launches traced whole ({ms(total)} on the GPU, {share:.0f}%"
    )
    assert NODE_HINT in note
    assert cli("ops", path, "-f", "markdown").stdout.rstrip("\n").endswith(note)
    assert cli("ops", path, "--shapes").stdout.rstrip("\n").endswith(note)
    # CSV and JSON stay the table alone
    assert "traced whole" not in cli("ops", path, "-f", "csv").stdout
    assert isinstance(json.loads(cli("ops", path, "-f", "json").stdout), list)
    assert "traced whole" not in cli("ops", fixture("ops_mlp")).stdout
    # the PR snippet's line of top operators by GPU time leaves the graphs out too, and says so under it, as
    # under its kernel table (which it was said under alone)
    md = cli("report", "-f", "markdown", path).stdout.split("\n")
    (at,) = [i for i, line in enumerate(md) if line.startswith("- **PyTorch ops by GPU time**: ")]
    assert md[at + 1] == "  - _" + note.replace("not in this table: ", "not in this list: ", 1) + "_", md[at + 1]
    assert f"_{note}_" in md  # under the kernel table, as before
    # the HTML report's operator table: the same line as under `ops` (its kernel chart says "not in this chart")
    cli("report", path, "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    said = note.partition(" `nsys profile")[0]  # before the hint's code span, which the page writes as <code>
    assert page.count(said) == 1 and page.index("PyTorch operators") < page.index(said), said


@needs_h200
def test_graph_whole_export_note_matches_its_rows():
    n, total = graph_rows(GRAPH_WHOLE)
    out = cli("kernels", GRAPH_WHOLE).stdout
    share = 100.0 * total / (total + kernel_ns(GRAPH_WHOLE))
    assert f"not in this table: {n} CUDA graph launches traced whole ({ms(total)} on the GPU, {share:.0f}%" in out
    in_step = launches_in(GRAPH_WHOLE, "graph_step")
    assert in_step[0] == n == 30  # by construction of w_graph.py: every replay inside `graph_step`
    kbr = cli("kernels-by-range", GRAPH_WHOLE).stdout
    assert f"(`graph_step`: {in_step[0]} CUDA graph launches, {ms(in_step[1])} on the GPU)" in kbr
    assert "traced whole" not in cli("kernels", GRAPH_NODE).stdout


# --- 2. collectives without payloads: calls and GPU time per kind from the NCCL kernels' names ------------------

PAIR = FIXTURES / "ddp_pair" / "rank0.sqlite"  # traced with -t nvtx, exported without --include-blobs


def nccl_kernels(path) -> dict[str, tuple[int, int]]:
    """kind -> (kernels, total ns) of the NCCL kernels (`ncclDevKernel_<Kind>_...`), counted in the export."""
    sql = """SELECT s.value, "end" - start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
             WHERE s.value LIKE 'ncclDevKernel_%'"""
    out: dict[str, tuple[int, int]] = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        for name, d in con.execute(sql):
            kind = name.split("_")[1]
            n, t = out.get(kind, (0, 0))
            out[kind] = (n + 1, t + d)
    return out


def nccl_ranges(path) -> dict[str, int]:
    """kind -> NVTX ranges of NCCL's domain named `nccl<Kind>`, counted in the export."""
    sql = """SELECT coalesce(n.text, s.value), count(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
             WHERE n.domainId = (SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL')
               AND n.eventType <> 75 GROUP BY 1"""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return {name.removeprefix("nccl"): n for name, n in con.execute(sql)}


def test_collectives_without_payloads_gives_calls_and_gpu_time_per_kind():
    res = cli("collectives", PAIR, "-f", "json")
    got = json.loads(res.stdout)
    want, calls = nccl_kernels(PAIR), nccl_ranges(PAIR)
    assert want and set(want) == {"AllReduce", "Broadcast", "AllGather"}
    rows = {r["kind"]: r for r in got["collectives"]}
    assert {k: (r["kernels"], r["gpu_ns"]) for k, r in rows.items()} == want
    assert {k: r["calls"] for k, r in rows.items()} == {k: calls[k] for k in want}
    note = got["note"][0]["note"]
    assert "--include-blobs=true" in note and "bandwidth" in note
    assert note.startswith(f"{sum(n for n, _ in want.values())} NCCL kernels")
    table = cli("collectives", PAIR).stdout
    assert table.rstrip("\n").split("\n")[-1] == note and "slow collectives" not in table
    assert cli("collectives", PAIR, "-f", "markdown").stdout.rstrip("\n").endswith(note)
    # per call, sizes are the answer: refused in one line, saying how to get them
    per_call = CliRunner().invoke(main, ["collectives", str(PAIR), "--by", "call"])
    assert per_call.exit_code == 2 and "--include-blobs=true" in per_call.stderr
    assert len(per_call.stderr.strip().split("\n")) == 1


def test_collectives_without_nccl_ranges_counts_no_calls(tmp_path):
    path = tmp_path / "no_ranges.sqlite"
    path.write_bytes(PAIR.read_bytes())
    with sqlite3.connect(path) as con:
        con.execute(
            "DELETE FROM NVTX_EVENTS WHERE domainId = (SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 "
            "AND text = 'NCCL')"
        )
    got = json.loads(cli("collectives", path, "-f", "json").stdout)
    rows = {r["kind"]: r for r in got["collectives"]}
    assert {k: (r["kernels"], r["gpu_ns"]) for k, r in rows.items()} == nccl_kernels(path)
    assert all(r["calls"] is None for r in rows.values())  # no range names a call: not counted, not 0
    assert "-t nvtx" in got["note"][0]["note"]


def test_collectives_with_payloads_keeps_its_findings():
    blobs = FIXTURES / "ddp_blobs" / "rank0.sqlite"
    out = cli("collectives", blobs).stdout
    assert "busbw_med_gbps" in out and "\nslow collectives: " in out and "NCCL kernels, by kind" not in out


# --- 3. diff of two programs whose loops share a name ------------------------------------------------------------


def kernel_names(path) -> set[str]:
    q = "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return {r[0] for r in con.execute(q)}


def verdict_of(base, new) -> tuple[str, list[str]]:
    rows = json.loads(cli("diff", "-f", "json", base, new).stdout)["verdict"]
    return next(r["value"] for r in rows if r["item"] == "verdict"), [
        r["value"] for r in rows if r["item"] == "warning"
    ]


def test_diff_of_two_programs_with_one_loop_name_gives_no_verdict():
    """graph_loop (a captured 4-layer graph replayed in `step <i>`) against mem_growth (an allocation and a matrix
    product in `step <i>`): both loops are `step`, and no kernel name is run by both loops (counted here: the export's only
    shared name is torch.randn's, before the loops). diff
    said `mem_growth.sqlite is slower: mean steady-state iteration 0.02 -> 0.38 ms` with only a warning."""
    base, new = fixture("graph_loop"), fixture("mem_growth")
    # the one name both exports hold is torch.randn's, which fills the inputs before either loop
    (shared,) = kernel_names(base) & kernel_names(new)
    assert shared.startswith("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<")
    head, warned = verdict_of(base, new)
    assert head.startswith("no iteration-time verdict: 0 of mem_growth.sqlite's ")
    assert "kernel time" in head and "two different programs" in head
    assert "slower" not in head and "faster" not in head
    assert any(w.startswith("0 of mem_growth.sqlite's") and w.endswith("run by graph_loop.sqlite too") for w in warned)
    r = CliRunner().invoke(main, ["diff", "--fail-above", "5", str(base), str(new)])
    assert r.exit_code == 2 and "needs two profiles of one program" in r.stderr


def test_diff_tells_two_programs_by_the_ranges_inside_their_loops():
    """ddp_pair's rank 0 (`step <i>` holding `data`, `forward`, `backward`, `optimizer`, NCCL's ranges) against
    mem_growth (`step <i>` holding no range): the loops' ranges share no name, and no kernel is shared."""
    base, new = FIXTURES / "ddp_pair" / "rank0.sqlite", fixture("mem_growth")
    assert not kernel_names(base) & kernel_names(new)
    head, warned = verdict_of(base, new)
    assert head.startswith(
        "no iteration-time verdict: the NVTX ranges inside their loops share no name (rank0.sqlite: "
    )
    assert "mem_growth.sqlite: none)" in head


@pytest.mark.parametrize(
    "pair",
    [("loop_before", "loop_after"), ("jitter_before", "jitter_after"), ("loader_cpu_before", "loader_cpu_after")],
)
def test_diff_of_one_program_keeps_its_verdict_and_says_nothing_of_programs(pair):
    """Each pair is one program before and after a change (fixtures/*/COMMAND.md): every kernel name of the
    first is run by the second too (counted here)."""
    base, new = fixture(pair[0]), fixture(pair[1])
    assert kernel_names(base) <= kernel_names(new)
    head, warned = verdict_of(base, new)
    assert not head.startswith("no iteration-time verdict") and "mean iteration time" in head or "is faster" in head
    assert not any("run by" in w or "share no name" in w for w in warned)


def test_collectives_without_gpu_activity_does_not_say_there_were_none(tmp_path):
    """An export that recorded no GPU activity (CUDA API calls only, as nsys writes when the GPU trace was lost)
    and no NCCL range cannot tell whether NCCL ran: `collectives` said `no NCCL collectives in this profile (no
    NCCL kernel ...)`. With the GPU trace (train_small, one GPU, no NCCL by construction) it stays `no NCCL`."""
    path = craft(
        tmp_path / "no_gpu.sqlite",
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY",
    )
    r = CliRunner().invoke(main, ["collectives", str(path)])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert "whether NCCL ran cannot be told" in line and "no NCCL collectives" not in line
    seeded(fixture("train_small"))
    r = CliRunner().invoke(main, ["collectives", str(fixture("train_small"))])
    assert r.exit_code == 2 and "no NCCL collectives in this profile (no NCCL kernel" in r.stderr


def test_diff_says_whole_graphs_hide_the_kernels_of_new(whole):
    """graph_loop against the same profile as --cuda-graph-trace=graph records it: one program, so the verdict
    stands; NEW's iterations ran their kernels inside whole-graph launches, which it says instead of `holds no
    kernel` (the export holds the warm-up's kernels, counted here)."""
    base, new = fixture("graph_loop"), whole
    assert kernel_names(new)  # the eager warm-up's kernels are still there
    head, warned = verdict_of(base, new)
    assert not head.startswith("no iteration-time verdict")
    assert warned == [
        "whole.sqlite runs no recorded kernel in its steady-state iterations and the other does: its GPU work there "
        "is CUDA graphs traced whole, whose kernels nsys did not record (`nsys profile --cuda-graph-trace=node` "
        "records them), so their kernels do not compare"
    ]
