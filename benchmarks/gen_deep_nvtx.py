#!/usr/bin/env python3
"""Synthetic deep-NVTX export in the style of PyTorch ``emit_nvtx``.

    python benchmarks/gen_deep_nvtx.py OUT [--ranges 50000] [--depth 6] [--kernels 10000]
                                          [--src REAL.sqlite] [--seed 0]

One main thread pushes/pops NVTX ranges (eventType 59 = NvtxPushPopRange, inline
``text``, domainId 0, as nsys exports torch.cuda.nvtx / emit_nvtx ranges) nested
up to ``--depth`` levels, named like ``aten::linear, seq = 123, op_id = 4`` (ops
deeper than level 3 carry only ``op_id``, like PyTorch ops that record no
autograd sequence number).  Leaf ranges launch the kernels: each launch is a
``cudaLaunchKernel_v7000`` CUPTI_ACTIVITY_KIND_RUNTIME row inside the leaf range,
whose correlationId matches exactly one CUPTI_ACTIVITY_KIND_KERNEL row on device
0 / stream 7 that starts a few microseconds after the launch (later only if the
stream is still busy).  If there are fewer kernels than leaves, only a random
subset of leaves launch (the others are named like view/alloc ops: aten::view,
aten::as_strided, ...); if there are more, some leaves launch several.

Schema and static rows come from a real export (``--src``, opened read-only):
the CREATE TABLE statements of every table written here are copied verbatim;
StringIds, ThreadNames, PROCESSES, TARGET_INFO_*, ENUM_*, META_DATA_* rows are
copied; kernel launch configurations / names are sampled from the real kernels.
globalPid / globalTid reuse the real CUDA process:  nsys serialises them as
``(vmId << 48) | (pid << 24) | tid`` (globalPid has tid = 0).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import time

DEFAULT_SRC = "/work/shared/nsys-exports/h200/train_osrt.sqlite"
KERNEL_T = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME_T = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_T = "NVTX_EVENTS"
FILLED = ("StringIds", NVTX_T, KERNEL_T, RUNTIME_T, "ANALYSIS_DETAILS")
COPIED = (
    "ThreadNames",
    "PROCESSES",
    "TARGET_INFO_GPU",
    "TARGET_INFO_CUDA_DEVICE",
    "TARGET_INFO_CUDA_CONTEXT_INFO",
    "TARGET_INFO_CUDA_STREAM",
    "TARGET_INFO_SYSTEM_ENV",
    "TARGET_INFO_SESSION_START_TIME",
    "META_DATA_EXPORT",
    "META_DATA_CAPTURE",
)
LAUNCH_API = "cudaLaunchKernel_v7000"
DEVICE, STREAM = 0, 7

TOP_OPS = [
    "aten::linear",
    "aten::conv2d",
    "aten::layer_norm",
    "aten::scaled_dot_product_attention",
    "aten::cross_entropy_loss",
    "aten::embedding",
    "aten::batch_norm",
    "aten::gelu",
    "autograd::engine::evaluate_function: AddmmBackward0",
    "autograd::engine::evaluate_function: NativeLayerNormBackward0",
    "Optimizer.step#SGD.step",
]
MID_OPS = [
    "aten::matmul",
    "aten::addmm",
    "aten::mm",
    "aten::native_layer_norm",
    "aten::_softmax",
    "aten::dropout",
    "aten::to",
    "aten::_to_copy",
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::log_softmax",
    "aten::nll_loss_nd",
    "aten::nll_loss",
    "aten::sum",
    "aten::mean",
    "AddmmBackward0",
    "aten::_foreach_add_",
    "aten::zero_",
]
KERNEL_LEAF_OPS = [
    "aten::addmm",
    "aten::mm",
    "aten::copy_",
    "aten::add_",
    "aten::mul",
    "aten::relu",
    "aten::fill_",
    "aten::_softmax",
    "aten::nll_loss_forward",
    "aten::sum",
    "aten::threshold_backward",
    "aten::_foreach_add_",
    "aten::bmm",
    "aten::gelu",
]
VIEW_LEAF_OPS = [
    "aten::view",
    "aten::t",
    "aten::transpose",
    "aten::as_strided",
    "aten::empty",
    "aten::empty_strided",
    "aten::reshape",
    "aten::expand",
    "aten::resolve_conj",
    "aten::detach",
    "aten::unsqueeze",
]


def q(n):
    return '"' + n.replace('"', '""') + '"'


def build_tree(rng, n_ranges, depth):
    """Return (depth, parent) lists in DFS pre-order with exactly n_ranges nodes."""
    depths, parents, children = [], [], []
    remaining = n_ranges
    # child-count distributions per level; deeper levels are more often leaves
    dist = {1: [1, 1, 2, 2, 3, 4], 2: [0, 1, 1, 2, 2, 3], 3: [0, 1, 1, 1, 2, 3], 4: [0, 0, 1, 1, 2, 2]}

    def node(d, parent):
        nonlocal remaining
        idx = len(depths)
        depths.append(d)
        parents.append(parent)
        children.append([])
        if parent >= 0:
            children[parent].append(idx)
        remaining -= 1
        if d < depth:
            nc = rng.choice(dist.get(d, [0, 0, 1, 1, 2]))
            for _ in range(nc):
                if remaining <= 0:
                    break
                node(d + 1, idx)

    # the first top-level op is a full-depth chain so every depth is present
    chain = min(depth, n_ranges)
    for d in range(1, chain + 1):
        depths.append(d)
        parents.append(len(depths) - 2 if d > 1 else -1)
        children.append([])
        if d > 1:
            children[len(depths) - 2].append(len(depths) - 1)
    remaining -= chain
    while remaining > 0:
        node(1, -1)
    return depths, parents, children


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--ranges", type=int, default=50000)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--kernels", type=int, default=10000)
    ap.add_argument("--src", default=DEFAULT_SRC, help="real export to take schema/static rows from")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    # node() and emit() recurse once per level: a 20,000-deep nesting (issue 30) needs more than Python's 1,000
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * a.depth + 100))
    if a.depth < 1 or a.ranges < 1:
        sys.exit("--ranges and --depth must be >= 1")
    t_start = time.perf_counter()
    rng = random.Random(a.seed)

    if os.path.exists(a.out):
        os.remove(a.out)
    con = sqlite3.connect(a.out, isolation_level=None)
    for p in ("journal_mode=OFF", "synchronous=OFF", "locking_mode=EXCLUSIVE"):
        con.execute("PRAGMA " + p)
    con.execute("ATTACH DATABASE ? AS src", ("file:" + os.path.abspath(a.src) + "?mode=ro",))
    src_tables = {n: s for n, s in con.execute("SELECT name, sql FROM src.sqlite_master WHERE type='table'")}
    missing = [t for t in FILLED if t not in src_tables]
    if missing:
        sys.exit(f"{a.src} lacks tables {missing}")
    wanted = (
        list(FILLED) + [t for t in COPIED if t in src_tables] + sorted(t for t in src_tables if t.startswith("ENUM_"))
    )
    con.execute("BEGIN")
    for t in wanted:
        con.execute(src_tables[t])
    for t in wanted:
        if t not in (NVTX_T, KERNEL_T, RUNTIME_T):
            con.execute(f"INSERT INTO main.{q(t)} SELECT * FROM src.{q(t)}")
    cols = {t: [r[1] for r in con.execute(f"PRAGMA main.table_info({q(t)})")] for t in wanted}

    # ---------------------------------------------------- identities from the real file
    gpid = con.execute(f"SELECT globalPid FROM src.{KERNEL_T} GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    pid = (gpid >> 24) & 0xFFFFFF
    # main thread: the thread of that process with the most runtime calls
    gtid = con.execute(
        f"SELECT globalTid FROM src.{RUNTIME_T} WHERE globalTid >> 24 = ? GROUP BY 1 ORDER BY count(*) DESC LIMIT 1",
        (gpid >> 24,),
    ).fetchone()[0]
    vm, tid = gpid >> 48, gtid & 0xFFFFFF
    assert gtid == (vm << 48) | (pid << 24) | tid, "unexpected GlobalId layout"
    row = con.execute("SELECT id FROM StringIds WHERE value = ?", (LAUNCH_API,)).fetchone()
    next_sid = con.execute("SELECT coalesce(max(id), -1) + 1 FROM StringIds").fetchone()[0]
    if row:
        launch_id = row[0]
    else:
        launch_id = next_sid
        con.execute("INSERT INTO StringIds VALUES (?, ?)", (launch_id, LAUNCH_API))
        next_sid += 1
    ctx = (
        con.execute("SELECT contextId FROM src.TARGET_INFO_CUDA_STREAM WHERE streamId = ?", (STREAM,)).fetchone()
        if "TARGET_INFO_CUDA_STREAM" in src_tables
        else None
    )
    ctx = ctx[0] if ctx else 1
    # kernel templates: one real kernel row per distinct name/launch configuration
    kcols = cols[KERNEL_T]
    templates = [
        dict(zip(kcols, r))
        for r in con.execute(
            f"SELECT * FROM src.{KERNEL_T} WHERE rowid IN (SELECT min(rowid) FROM src.{KERNEL_T} "
            f"GROUP BY demangledName, gridX, gridY, gridZ, blockX, blockY, blockZ) ORDER BY rowid"
        )
    ]
    t_base = con.execute("SELECT startTime FROM src.ANALYSIS_DETAILS").fetchone()[0] + 1_000_000_000

    # ---------------------------------------------------------------- tree
    depths, parents, children = build_tree(rng, a.ranges, a.depth)
    leaves = [i for i, c in enumerate(children) if not c]
    n_k = a.kernels
    per_leaf = {}
    if n_k >= len(leaves):
        for i in leaves:
            per_leaf[i] = 1
        for i in rng.choices(leaves, k=n_k - len(leaves)):
            per_leaf[i] += 1
    else:
        for i in rng.sample(leaves, n_k):
            per_leaf[i] = 1
    leaf_tmpl = {}  # op name -> template index, so one op always runs the same kernel

    # ---------------------------------------------------------------- timeline
    nvtx_rows = [None] * len(depths)
    rt_rows, k_rows = [], []
    t = t_base
    gpu_free = t_base
    corr = 100
    grid = 1
    op_id = 0
    seq = 0
    ncol, rcol = cols[NVTX_T], cols[RUNTIME_T]

    def emit(i):
        nonlocal t, gpu_free, corr, grid, op_id, seq
        d = depths[i]
        nk = per_leaf.get(i, 0)
        if d == 1:
            name = rng.choice(TOP_OPS)
            t += rng.randint(2_000, 20_000)  # python between top-level ops
        elif children[i]:
            name = rng.choice(MID_OPS)
        else:
            name = rng.choice(KERNEL_LEAF_OPS if nk else VIEW_LEAF_OPS)
        if d <= 3:
            text = f"{name}, seq = {seq}, op_id = {op_id}"
            seq += 1
        else:
            text = f"{name}, op_id = {op_id}"
        op_id += 1
        t += rng.randint(100, 600)
        start = t
        t += rng.randint(300, 1_500)  # dispatcher overhead
        for c in children[i]:
            emit(c)
        for _ in range(nk):
            t += rng.randint(200, 800)
            rs = t
            re_ = rs + rng.randint(2_000, 6_000)
            corr += rng.choice((1, 1, 1, 2, 3))  # gaps = other (untraced here) API calls
            tmpl = templates[leaf_tmpl.setdefault(name, len(leaf_tmpl) % len(templates))]
            ks = max(rs + rng.randint(1_500, 4_000), gpu_free + rng.randint(200, 1_000))
            ke = ks + rng.randint(1_500, 12_000)
            gpu_free = ke
            rt_rows.append(
                dict(
                    start=rs,
                    end=re_,
                    eventClass=0,
                    globalTid=gtid,
                    correlationId=corr,
                    nameId=launch_id,
                    returnValue=0,
                    callchainId=None,
                )
            )
            k = dict(tmpl)
            k.update(
                start=ks,
                end=ke,
                deviceId=DEVICE,
                contextId=ctx,
                streamId=STREAM,
                correlationId=corr,
                globalPid=gpid,
                gridId=grid,
                graphNodeId=None,
            )
            grid += 1
            k_rows.append(k)
            t = re_
        t += rng.randint(200, 800)
        nvtx_rows[i] = dict(start=start, end=t, eventType=59, text=text, globalTid=gtid, domainId=0)

    for i, d in enumerate(depths):
        if d == 1:
            emit(i)

    def tuples(rows, cl):
        return (tuple(r.get(c) for c in cl) for r in rows)

    def ph(cl):
        return ",".join("?" * len(cl))

    con.executemany(f"INSERT INTO {NVTX_T} VALUES ({ph(ncol)})", tuples(nvtx_rows, ncol))
    con.executemany(f"INSERT INTO {RUNTIME_T} VALUES ({ph(rcol)})", tuples(rt_rows, rcol))
    con.executemany(f"INSERT INTO {KERNEL_T} VALUES ({ph(kcols)})", tuples(k_rows, kcols))
    t0 = t_base - 1_000_000
    t1 = max(t, gpu_free) + 1_000_000
    con.execute("UPDATE ANALYSIS_DETAILS SET startTime = ?, stopTime = ?, duration = ?", (t0, t1, t1 - t0))
    con.execute("COMMIT")
    con.execute("DETACH DATABASE src")
    con.close()
    elapsed = time.perf_counter() - t_start

    hist = {}
    for d in depths:
        hist[d] = hist.get(d, 0) + 1
    size = os.path.getsize(a.out)
    print(f"output        {a.out}  (schema/static rows from {a.src})")
    print(f"process       globalPid {gpid} = vm {vm} << 48 | pid {pid} << 24; main thread globalTid {gtid} (tid {tid})")
    print(
        f"NVTX ranges   {len(depths):,d} (eventType 59), per depth {dict(sorted(hist.items()))}, "
        f"leaves {len(leaves):,d}, launching leaves {len(per_leaf):,d}"
    )
    print(
        f"kernels       {len(k_rows):,d} (device {DEVICE}, stream {STREAM}, {len(templates)} "
        f"real kernel templates); runtime launches {len(rt_rows):,d}"
    )
    print(f"time span     {(t1 - t0) / 1e6:.1f} ms")
    print(f"file size     {size / 2**20:.1f} MiB ({size:,d} B)")
    print(f"elapsed       {elapsed:.2f} s")


if __name__ == "__main__":
    main()
