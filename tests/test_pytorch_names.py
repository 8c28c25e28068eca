"""PyTorch's own range names (emit_nvtx, `nsys profile --pytorch=autograd-nvtx` / `autograd-shapes-nvtx`):
`aten::conv2d, seq = 12, op_id = 1479, sizes = [...]`. Every call's name is its own, so wherever nsysql compares or
groups ranges it must take the operator's name without its arguments; and an operator that re-enters itself is
one call. Known answers: the raw NVTX_EVENTS rows of the fixtures (read here with Python's sqlite3), nsys stats'
nvtx_sum, and the fixtures' construction (fixtures/ops_*/COMMAND.md)."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections import Counter

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import fixture, loaded, reference_csv, seeded

from nsysql.cli import main
from nsysql.errors import NsysqlError

OPS_MLP = fixture("ops_mlp")
OPS_TRANSFORMER = fixture("ops_transformer")
# `nsys profile --pytorch=autograd-shapes-nvtx` of a small ResNet-style loop: 12 `iter <i>` ranges, each with
# `forward` (bf16 autocast), `backward`, `optimizer` (fixtures/pytorch_nvtx/COMMAND.md)
PYTORCH_NVTX = fixture("pytorch_nvtx")
NSYS_PHASES = ("forward", "backward", "optimizer")
USER_PHASES = ("Forward Pass", "Backward Pass", "Optimizer step")
# emit_nvtx's per-call arguments, as PyTorch writes them (torch/autograd/profiler.py, emit_nvtx): the test's own
# parse, not nsysql's
ARGS = re.compile(r", (seq|op_id|sizes|input_op_ids) = ")


def bare(name: str) -> str:
    """An operator range's name without its arguments."""
    m = ARGS.search(name)
    return name[: m.start()] if m else name


def raw_push_pop(path) -> list[tuple[int, int, int, str]]:
    """(globalTid, start, end, name) of every closed push/pop range in the export, in start order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        'SELECT n.globalTid, n.start, n."end", coalesce(n.text, s.value) FROM NVTX_EVENTS n '
        "LEFT JOIN StringIds s ON s.id = n.textId "
        'WHERE n.eventType = 59 AND n."end" IS NOT NULL ORDER BY n.globalTid, n.start, n."end" DESC'
    ).fetchall()
    db.close()
    return rows


def without(path, tmp_path, names) -> str:
    """A copy of the export `path` without its push/pop ranges named `names`."""
    out = tmp_path / path.name
    shutil.copyfile(path, out)
    db = sqlite3.connect(out)
    db.execute(f"DELETE FROM NVTX_EVENTS WHERE text IN ({', '.join('?' * len(names))})", names)
    db.commit()
    db.close()
    return str(out)


def outermost(rows):
    """The rows (globalTid, start, end, name) inside no other row of the same thread."""
    return [r for r in rows if not any(o is not r and o[0] == r[0] and o[1] <= r[1] and r[2] <= o[2] for o in rows)]


def test_nsys_pytorch_annotation_loop():
    """The fixture as recorded: the loop is `iter`, 12 iterations, phases forward, backward and optimizer."""
    prof = loaded(str(PYTORCH_NVTX))
    its = prof.iterations()
    assert its["name"].to_list() == [f"iter {i}" for i in range(12)]
    assert [c for c in its.columns if c.endswith(" cpu_ns")] == [f"{p} cpu_ns" for p in NSYS_PHASES]


def test_nsys_pytorch_iter_holding_operator_calls_is_the_loop(tmp_path):
    """The same loop with nothing between `iter <i>` and the operator calls (the phases' ranges removed), as the
    issue's ResNet loop: every step holds the same operators under other ids, so `iter` is the loop and its
    phases are operators. (Before: `consecutive iterations share 39% ...`, no loop.)"""
    path = without(PYTORCH_NVTX, tmp_path, NSYS_PHASES)
    prof = loaded(path)
    its = prof.iterations()
    assert its["name"].to_list() == [f"iter {i}" for i in range(12)]
    rows = raw_push_pop(path)
    steps = [r for r in rows if r[3].startswith("iter ")]
    per_step = []
    for tid, s, e, _ in steps:
        inside = [r for r in rows if r[0] == tid and s <= r[1] and r[2] <= e and r[3] != steps[0][3]]
        per_step.append({bare(r[3]) for r in outermost([r for r in inside if not r[3].startswith("iter ")])})
    phases = {c[: -len(" cpu_ns")] for c in its.columns if c.endswith(" cpu_ns")}
    assert phases == set().union(*per_step) and not any(ARGS.search(p) for p in phases)
    assert per_step[1] == per_step[2]  # steady steps run the same operators (by construction)


def test_nsys_pytorch_ranges_and_gap_causes_one_row_per_operator():
    """`ranges`: counts per operator are the raw rows' grouped by operator; nsys's nvtx_sum has a row per call
    (`--attribution thread` keeps those). Gap causes: `host:<operator>`, one row per operator."""
    prof = loaded(str(PYTORCH_NVTX))
    rows = raw_push_pop(PYTORCH_NVTX)
    want = Counter(bare(r[3]) for r in rows)
    got = prof.ranges()
    assert dict(zip(got["name"], got["count"])) == dict(want)
    nsys_rows = pl.read_csv(reference_csv(PYTORCH_NVTX, "nvtx_sum"), infer_schema_length=0).height
    assert prof.ranges(attribution="thread").height == nsys_rows > 10 * got.height
    g = prof.gaps(min_ns="20us")
    host = g.filter(pl.col("range").str.contains(", op_id = ") & pl.col("cause").str.starts_with("host:"))
    assert host.height > host["cause"].n_unique() > 1
    assert host["cause"].to_list() == ["host:" + bare(r) for r in host["range"]]
    by = prof.gaps(min_ns="20us", by="cause")
    assert by["cause"].n_unique() == by.height and not any(ARGS.search(c) for c in by["cause"])


def test_nsys_pytorch_autocast_conv2d_is_one_call_each():
    """Under bf16 autocast `aten::conv2d` re-enters itself: `ops` counts the calls inside no aten::conv2d of
    their thread, as counted here from the raw rows, and their CPU time once."""
    prof = loaded(str(PYTORCH_NVTX))
    rows = [r for r in raw_push_pop(PYTORCH_NVTX) if bare(r[3]) == "aten::conv2d"]
    outer = outermost(rows)
    assert len(rows) > len(outer) > 0
    conv = prof.ops().filter(pl.col("op") == "aten::conv2d").row(0, named=True)
    assert conv["calls"] == len(outer) and conv["cpu_ns"] == sum(e - s for _, s, e, _ in outer)


@pytest.fixture(scope="module")
def flat_transformer(tmp_path_factory):
    """ops_transformer without its user phase ranges: each `Batch<i>` holds the operator calls directly, as a
    loop annotated only with `iter N` under `nsys profile --pytorch=autograd-nvtx` does."""
    path = tmp_path_factory.mktemp("flat") / "flat_transformer.sqlite"
    shutil.copyfile(OPS_TRANSFORMER, path)
    db = sqlite3.connect(path)
    gone = db.execute(
        f"DELETE FROM NVTX_EVENTS WHERE text IN ({', '.join('?' * len(USER_PHASES))})", USER_PHASES
    ).rowcount
    db.commit()
    db.close()
    assert gone == 3 * 4  # three phases in each of the 4 steps
    return path


def test_iteration_found_when_operator_calls_are_its_children(flat_transformer):
    """The 4 `Batch<i>` ranges hold the same operators each step, under other op_ids: they are the loop, and the
    per-iteration phases are operators, not calls. (Before: `consecutive iterations share 21% of their kernel and
    child range names`, no loop.)"""
    prof = loaded(str(flat_transformer))
    its = prof.iterations()
    assert its["name"].to_list() == [f"Batch{i}" for i in range(4)]
    st = prof.iteration_stats().row(0, named=True)
    assert "share 100% of their kernel and child range names" in st["detected"]
    # each step's direct children, by operator, from the raw rows: the phases of iterations()
    rows = raw_push_pop(flat_transformer)
    steps = [r for r in rows if r[3].startswith("Batch")]
    tid = steps[0][0]
    ops_per_step = []
    for _, s, e, _ in steps:
        inside = [r for r in rows if r[0] == tid and s <= r[1] and r[2] <= e and not r[3].startswith("Batch")]
        top = [r for r in inside if not any(o is not r and o[1] <= r[1] and r[2] <= o[2] for o in inside)]
        ops_per_step.append({bare(r[3]) for r in top})
    assert all(ops == ops_per_step[0] for ops in ops_per_step)  # by construction: the same step each time
    phases = {c[: -len(" cpu_ns")] for c in its.columns if c.endswith(" cpu_ns")}
    assert phases == ops_per_step[0]
    assert not any(ARGS.search(p) for p in phases)


def test_pytorch_ranges_are_never_the_loop(tmp_path):
    """Without a range of the program's own, no operator is taken for the step, however often it repeats."""
    path = tmp_path / "ops_only.sqlite"
    shutil.copyfile(OPS_MLP, path)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM NVTX_EVENTS WHERE text IN (?, ?, ?) OR text LIKE 'Batch%'", USER_PHASES)
    db.commit()
    db.close()
    prof = loaded(str(path))
    n = len(raw_push_pop(path))
    repeats = Counter(bare(r[3]) for r in raw_push_pop(path))
    assert repeats["aten::linear"] == 3 * 6  # an operator that repeats, and is no loop
    with pytest.raises(NsysqlError, match=f"all {n:,} push/pop ranges are PyTorch's own"):
        prof.iterations()
    res = CliRunner().invoke(main, ["iterations", str(path)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and "--range" in res.stderr


def test_ranges_one_row_per_operator():
    """`ranges` (process rule, the default) groups the calls of an operator: counts and CPU time per name are
    the raw rows' grouped by operator; `--attribution thread` keeps nsys stats' one row per full name."""
    prof = loaded(str(OPS_TRANSFORMER))
    rows = raw_push_pop(OPS_TRANSFORMER)
    want_n, want_ns = Counter(), Counter()
    for _, s, e, name in rows:
        want_n[bare(name)] += 1
        want_ns[bare(name)] += e - s
    got = prof.ranges()
    assert dict(zip(got["name"], got["count"])) == dict(want_n)
    assert dict(zip(got["name"], got["total_ns"])) == dict(want_ns)
    assert prof.ranges(attribution="thread").height == len({r[3] for r in rows}) > got.height
    res = CliRunner().invoke(main, ["ranges", str(OPS_TRANSFORMER), "-f", "csv", "--no-group-ops"])
    assert res.exit_code == 0 and pl.read_csv(res.stdout.encode()).height == len({r[3] for r in rows})


def test_report_nvtx_table_one_row_per_operator(tmp_path):
    """The report's NVTX table: one row per name of nsys's nvtx_sum once the calls' arguments are dropped."""
    names = {bare(r[1:]) for r in pl.read_csv(reference_csv(OPS_MLP, "nvtx_sum"), infer_schema_length=0)["Range"]}
    out = tmp_path / "r.html"
    seeded(OPS_MLP)  # the run's entry, which loaded() reads in the other tests
    res = CliRunner().invoke(main, ["report", str(OPS_MLP), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    section = text[text.index(">NVTX ranges<") : text.index(">Kernels by range<")]
    assert section.count("<tr>") == 1 + len(names) < 100  # the header, then one row per operator
    assert " op_id = " not in section and "First 100 of" not in section


def test_gap_causes_one_row_per_operator():
    """A gap whose cause is a PyTorch operator range is caused by `host:<operator>`, not by one call."""
    prof = loaded(str(OPS_TRANSFORMER))
    g = prof.gaps(min_ns="20us")
    host = g.filter(pl.col("cause").str.starts_with("host:") & pl.col("range").str.contains(", op_id = "))
    assert host.height > host["cause"].n_unique() > 1  # several calls of one operator behind gaps
    assert host["cause"].to_list() == ["host:" + bare(r) for r in host["range"]]
    by = prof.gaps(min_ns="20us", by="cause", include_warmup=True)
    assert by["cause"].n_unique() == by.height
    assert not any(ARGS.search(c) for c in by["cause"])
    for cause, n in Counter(host["cause"]).items():
        assert by.filter(pl.col("cause") == cause)["gaps"][0] >= n


def test_gap_activity_names_operators():
    """What the autograd thread did during the gaps: operators and backward nodes, not their calls."""
    prof = loaded(str(OPS_MLP))
    acts = prof.gap_activity(min_ns="20us", by="cause", include_warmup=True).filter(pl.col("kind") == "nvtx")
    assert acts.height and not any(ARGS.search(a) for a in acts["activity"])
    keys = acts.select("cause", "tid", "domain", "activity")
    assert keys.unique().height == keys.height
    assert "AddmmBackward0" in acts["activity"].to_list()


def test_reentered_operator_is_one_call():
    """ops_transformer's aten::div (a tensor by a scalar) re-enters aten::div (tensor by tensor) within each call
    of the attention's scaling: `ops` counts the calls that are inside no aten::div of their thread, and their
    time, as counted here from the raw rows."""
    prof = loaded(str(OPS_TRANSFORMER))
    rows = [r for r in raw_push_pop(OPS_TRANSFORMER) if bare(r[3]) == "aten::div"]
    outer = outermost(rows)
    assert len(rows) > len(outer) > 0  # some re-enter
    div = prof.ops().filter(pl.col("op") == "aten::div").row(0, named=True)
    assert div["calls"] == len(outer)
    assert div["cpu_ns"] == sum(e - s for _, s, e, _ in outer)
    by_shape = prof.ops(shapes=True).filter(pl.col("op") == "aten::div")
    assert by_shape["calls"].sum() == len(outer) and by_shape["cpu_ns"].sum() == div["cpu_ns"]


def test_kernel_categories_per_range_one_row_per_operator():
    """`kernels --per range --by category`: the kernels of every call of an operator under one name, their count
    the kernels launched inside its ranges, as nsys's nvtx_kern_sum counts them per full name (summed here over
    the calls; the process rule credits no operator range with another thread's kernels)."""
    prof = loaded(str(OPS_MLP))
    got = prof.kernels(by="category", per="range", attribution="thread")
    assert got.filter(pl.col("range").str.contains(", op_id = ")).height > 0  # thread: nsys's names, per call
    got = prof.kernels(by="category", per="range")
    assert not any(ARGS.search(r) for r in got["range"])
    want = Counter()
    for r in pl.read_csv(reference_csv(OPS_MLP, "nvtx_kern_sum"), infer_schema_length=0).iter_rows(named=True):
        if r["NVTX Range"] and bare(r["NVTX Range"][1:]) == "aten::linear":
            want["aten::linear"] += int(r["Kern Inst"])
    lin = got.filter(pl.col("range") == "aten::linear")
    assert lin["count"].sum() == want["aten::linear"] > 0


def test_operator_range_is_no_data_loader(tmp_path):
    """train_small with each `Load data` range renamed as PyTorch names an operator call (`aten::batch_norm, seq =
    i, op_id = j`, ids distinct per call): the steady-state idle time falls in one operator, so the CPU is in
    `aten::batch_norm` for it (host bound); `batch` in an operator's name says nothing of data loading."""
    path = tmp_path / "train_small_ops.sqlite"
    shutil.copyfile(fixture("train_small"), path)
    db = sqlite3.connect(path)
    rows = db.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = 'Load data' ORDER BY start").fetchall()
    for i, (rowid,) in enumerate(rows):
        name = f"aten::batch_norm, seq = {i}, op_id = {1000 + 7 * i}"
        db.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", (name, rowid))
    db.commit()
    db.close()
    assert len(rows) == 20  # one per step (fixtures/README.md)
    prof = loaded(str(path))
    found = dict(prof.summary()["findings"].select("finding", "evidence").iter_rows())
    assert "data-loader bound" not in found
    assert found["host bound"].startswith("100% of ") and "`aten::batch_norm` on the CPU" in found["host bound"]
