"""What `kernels`, `metrics`, `gpu-memory`, `collectives`, `overlap`, `cpu`, `diff` and the report say on kinds of
profile the team did not make: each test holds a sentence or a number to the raw export, or to what a fixture's
workload did by construction."""

from __future__ import annotations

import json
import shutil
import sqlite3

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, PUBLIC, built_cache, craft, fixture, loaded, raw

import nsysql
from nsysql.cli import main

# (fixture, start of a demangled kernel name in it, category, tensor_cores): what the kernel's name says it does
CONVOLUTIONS = [
    # cuDNN's xmma FFMA convolution: fp32 fused multiply-adds on CUDA cores, whatever `xmma` and `implicit_gemm` say
    ("jitter_before", "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_", "conv", "no"),
    # Hopper's bf16 xmma data-gradient convolution: 16-bit xmma convolutions exist only on tensor cores (as the
    # xmma GEMMs of 16-bit inputs), though the name carries no instruction token
    ("pytorch_nvtx", "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_", "conv", "yes"),
]


@pytest.mark.parametrize("name,start,category,tensor_cores", CONVOLUTIONS, ids=[c[1][:40] for c in CONVOLUTIONS])
def test_xmma_convolutions_say_what_their_names_say(name, start, category, tensor_cores):
    k = loaded(str(fixture(name))).kernels().filter(pl.col("name").str.starts_with(start))
    assert k.height >= 1, f"no kernel named {start}... in {name}"
    assert set(k["category"]) == {category}
    assert set(k["tensor_cores"]) == {tensor_cores}


def test_pre_ampere_tensor_core_names():
    """Names of kernels from Volta and Turing libraries (no export here holds them), through the rules table: cuDNN
    names its tensor-core convolutions by their MMA shape (h884, s1688) before `cudnn`, and CUDA's WMMA API
    compiles only to tensor-core instructions."""
    prof = loaded(str(fixture("train_small")))
    cases = {
        "volta_h884cudnn_256x64_ldg8_splitK_relu_exp_small_nhwc_tn_v1": ("conv", "yes"),
        "turing_fp16_s1688cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1": ("conv", "yes"),
        "volta_fp16_scudnn_fp16_128x64_relu_interior_nn_v1": ("conv", "no"),
        "volta_h884gemm_64x64_ldg8_nn": ("gemm", "yes"),
        "simple_wmma_gemm(__half *, __half *, float *, float *, int, int, int, float, float)": ("gemm", "yes"),
        "maxwell_sgemm_128x64_nn": ("gemm", "no"),
    }
    for name, want in cases.items():
        got = prof.sql(
            f"SELECT category, tensor_cores FROM kernel_rules WHERE regexp_matches(lower('{name}'), pattern) "
            "ORDER BY priority LIMIT 1"
        ).rows()
        assert (got[0] if got else (None, None)) == want, name


def test_pinned_host_memory_is_not_held_on_the_device(tmp_path):
    """cudaHostAlloc's pinned host buffers come in CUDA's memory usage events with the device of their context
    (memKind Pinned): listed, but not held on the device. mem_growth with its per-step 4 MiB temporary made pinned:
    each step then peaks only by the 2 MiB buffer it keeps, and held_bytes ends at the raw device rows' net."""
    path = craft(
        tmp_path / "pinned.sqlite",
        f"UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET memKind = 1 WHERE bytes = {4 * 2**20}",
        source="mem_growth",
    )
    (net,) = raw(
        path,
        "SELECT sum(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END) FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
        "WHERE memKind <> 1",
    )[0]
    (pinned,) = raw(path, "SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind = 1")[0]
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    events = prof.gpu_memory()
    assert events.filter(pl.col("memory_kind") == "Pinned").height == pinned > 0
    assert events["held_bytes"][-1] == net
    steps = prof.gpu_memory(by="iteration").filter(pl.col("iteration") >= 1)
    assert (steps["peak_bytes"] - steps["start_bytes"]).to_list() == [2 * 2**20] * steps.height
    prof.close()


def test_nccl_kernels_without_nccl_ranges_are_not_called_absent(tmp_path):
    """NCCL writes its NVTX ranges only when nsys traces NVTX (and NCCL_NVTX_DISABLE is unset): a DDP rank without
    them still ran its collectives. `collectives` must not say there are none: it names the NCCL kernels that ran
    and their GPU time, counted here from the raw kernel rows."""
    path = tmp_path / "rank0.sqlite"
    shutil.copy(FIXTURES / "ddp_blobs" / "rank0.sqlite", path)
    with sqlite3.connect(path) as con:  # drop NCCL's domain: its ranges, payloads and the domain's name
        (domain,) = con.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'").fetchone()
        con.execute("DELETE FROM NVTX_EVENTS WHERE domainId = ?", (domain,))
    (kernels, ns) = raw(
        path,
        "SELECT count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
        "ON s.id = k.demangledName WHERE lower(s.value) LIKE '%nccl%'",
    )[0]
    assert kernels > 0
    # per call (per kind, the kernels' names answer: tests/test_graphs_said.py)
    r = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "collectives", str(path), "--by", "call"])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert "no NCCL collectives" not in line
    assert f"{kernels:,} NCCL kernels ran ({ns / 1e6:,.2f} ms of GPU time)" in line


@pytest.mark.parametrize(
    "name", ["MohanadOdema__DLProf__nsys_profile.sqlite", "YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite"]
)
def test_snippet_heads_its_findings_once(name):
    """Where no finding is to be fixed first (no loop to rank them by: one forward pass of DLProf; none worth it:
    poolformer), the summary's first line says why; the snippet puts that line under its one **Findings** head,
    not under a second `**Findings**:` label of its own."""
    path = PUBLIC / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    first = loaded(str(path)).summary()["facts"].row(0, named=True)
    assert first["key"] == "fix_first" and first["item"] == "findings"
    r = CliRunner().invoke(main, ["report", "-f", "markdown", str(path)], catch_exceptions=False)
    assert r.output.count("**Findings**") == 1 and "**Fix first**" not in r.output
    section = r.output[r.output.index("**Findings**") : r.output.index("**Profile**")]
    assert first["value"] in section


def _public_export(name: str):
    path = PUBLIC / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


def test_cpu_without_samples_or_gpu_activity_says_what_each_window_lacks():
    """An export with CUDA API calls and thread scheduling but neither CPU samples nor GPU activity traced (qcu):
    plain `cpu` answers per thread from the scheduling events, saying why not per function (no CPU samples);
    `cpu --during gaps` lacks the gaps themselves, and says so in one line, not a sentence about samples."""
    path = _public_export("ZhangXin8069__qcu__report1-c8a5c5de.sqlite")
    tables = {t for (t,) in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "COMPOSITE_EVENTS" not in tables and "CUPTI_ACTIVITY_KIND_RUNTIME" in tables and "SCHED_EVENTS" in tables
    assert "CUPTI_ACTIVITY_KIND_KERNEL" not in tables
    r = CliRunner().invoke(main, ["cpu", str(path)])
    assert r.exit_code == 0, r.output
    assert "no CPU samples in this profile, so per thread" in r.output and "-s process-tree" in r.output
    r = CliRunner().invoke(main, ["cpu", "--during", "gaps", str(path)])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert "no GPU work traced in this profile" in line and "no GPU idle gaps" in line, line


def test_cpu_during_gaps_that_no_sample_fell_in():
    """0x822a5b87's one GPU idle gap of 1 ms or more (5 ms) holds none of its 207 CPU samples (counted in the raw
    COMPOSITE_EVENTS): one line saying so, not an empty `no cpu`."""
    path = _public_export("0x822a5b87__test-cuda__report2.sqlite")
    g = loaded(str(path)).gaps()
    assert g.height == 1
    start, end = g["start_ns"][0], g["end_ns"][0]
    assert raw(path, "SELECT count(*) FROM COMPOSITE_EVENTS WHERE start >= ? AND start < ?", start, end) == [(0,)]
    assert raw(path, "SELECT count(*) FROM COMPOSITE_EVENTS")[0][0] > 0
    r = CliRunner().invoke(main, ["cpu", "--during", "gaps", str(path)])
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert f"no CPU sample was taken during gaps (1 window, {(end - start) / 1e6:,.2f} ms in all)" in line


def test_ranks_says_why_no_straggler_can_be_judged(tmp_path):
    """A straggler is seen only in another rank's wait: with one rank that has a loop (ddp_pair's rank 0, beside a
    copy of rank 1 whose NVTX ranges were dropped), `ranks` says why none can be judged, and names the rank left
    out of the per-rank table with its reason, rather than `no stragglers` over a table missing a rank."""
    one = tmp_path / "rank1.sqlite"
    shutil.copy(FIXTURES / "ddp_pair" / "rank1.sqlite", one)
    with sqlite3.connect(one) as con:
        con.execute("DELETE FROM NVTX_EVENTS")
    zero = FIXTURES / "ddp_pair" / "rank0.sqlite"
    # rank 0 from the entry a first load builds, in this process (the pool and the cold build: test_ranks.py)
    args = ["--cache-dir", str(built_cache(tmp_path / "cache", zero)), "ranks", "--workers", "1", "-f", "json"]
    r = CliRunner().invoke(main, [*args, str(zero), str(one)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [row["rank"] for row in out["per rank"]] == [0]
    (left,) = [row for row in out["files"] if row["rank"] == 1]
    assert "iterations cannot be found" in left["problem"]
    (s,) = out["stragglers"]
    assert s["rank"] is None and "1 of 2 ranks has a loop" in s["sentence"] and "rank 1: no NVTX" in s["sentence"]


def test_report_says_no_gpu_traced_not_none_used(tmp_path):
    """train_small with its GPU activity tables dropped: CUDA API calls (cudaLaunchKernel among them) show the
    program used the GPU, though no kernel, copy or memset was recorded. The report's GPU card says the GPU work
    was not traced, never that no GPU was used."""
    path = craft(
        tmp_path / "untraced.sqlite",
        *(
            f"DROP TABLE IF EXISTS {t}"
            for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
        ),
    )
    (launches,) = raw(
        path,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaLaunchKernel%'",
    )[0]
    assert launches > 0
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    cards = {label: (value, detail) for label, value, detail in prof.report()["cards"].iter_rows()}
    value, detail = cards["GPUs"]
    assert value == "none traced" and "CUDA API calls but no GPU activity" in detail
    page = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "report", str(path), "-o", str(page)])
    assert r.exit_code == 0, r.output
    text = page.read_text(encoding="utf-8")
    cards_html = text[text.index('<div class="facts">') : text.index(">Findings<")]
    assert "none traced" in cards_html and "none used" not in cards_html
    assert "No GPU work traced in this profile" in text
    prof.close()


def test_one_kernel_is_not_top_1_kernels():
    """Lianhang666's vecAdd export ran one kernel (one name in the raw kernel rows): the snippet titles its table
    `Top kernel`, not `Top 1 kernels`."""
    path = _public_export("Lianhang666__gpu4__report2.sqlite")
    assert raw(path, "SELECT count(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL") == [(1,)]
    r = CliRunner().invoke(main, ["report", "-f", "markdown", str(path)], catch_exceptions=False)
    assert "**Top kernel**" in r.output and "Top 1 kernels" not in r.output


def test_diff_calls_a_copy_a_gpu_op_not_a_kernel():
    """loop_before -> loop_after: the only significant change among GPU ops is the host-to-device copy (the stall
    removed was in the CPU transform, by construction). The verdict's line on it names a GPU op, as the table of
    kernels, copies and memsets is; a copy is not a kernel."""
    base, new = loaded(str(fixture("loop_before"))), loaded(str(fixture("loop_after")))
    res = base.diff(new)
    notes = dict(res.notes.iter_rows())
    top = res.kernels["name"][0]
    assert top.startswith("[CUDA memcpy")
    assert "largest kernel change" not in notes
    assert notes["largest GPU op change"].startswith(f"{top}:")


def test_collective_skew_line_reads_as_a_duration():
    """ddp_blobs: rank 1 sleeps 30 ms in `data` every 5th step (by construction), so the largest start skew
    across the two ranks is tens of milliseconds: the line says it in ms, not as `3.566e+04 us`."""
    files = [str(FIXTURES / "ddp_blobs" / f"rank{r}.sqlite") for r in (0, 1)]
    r = CliRunner().invoke(main, ["collectives", *files], catch_exceptions=False)
    (line,) = [ln for ln in r.output.splitlines() if ln.startswith("skew:")]
    assert "e+" not in line
    top = float(line.split(", max ")[1].split(" ms;")[0].replace(",", ""))
    assert 30 <= top < 60, line


def test_ops_gives_the_pytorch_switch_only_where_pytorch_ran():
    """`ops` on a plain CUDA program (Lianhang666's vecAdd: no string of the export names torch) says it answers
    about PyTorch programs, not to record with `--pytorch`; on train_small (PyTorch, no operator ranges) it names
    the switch."""
    path = _public_export("Lianhang666__gpu4__report2.sqlite")
    assert raw(path, "SELECT count(*) FROM StringIds WHERE lower(value) LIKE '%torch%'") == [(0,)]
    for export, switch in ((path, False), (fixture("train_small"), True)):
        r = CliRunner().invoke(main, ["ops", str(export)])
        assert r.exit_code == 2
        (line,) = r.stderr.strip().splitlines()
        assert "no PyTorch operator ranges" in line
        assert ("--pytorch=autograd-shapes-nvtx" in line) is switch, line


def test_timeline_window_longer_than_the_active_span_is_not_a_part_of_it():
    """hw_mix: the iterations' window (first Batch start to last Batch end) is longer than the GPU's active span
    (first to last GPU op in the raw kernel, copy and memset rows), as warm-up CPU work runs before any GPU op. The
    report's line under the timeline does not call the window `x s of the GPU's y s active span`."""
    path = fixture("hw_mix")
    tables = {t for (t,) in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    ops = [f"CUPTI_ACTIVITY_KIND_{k}" for k in ("KERNEL", "MEMCPY", "MEMSET")]
    union = " UNION ALL ".join(f'SELECT start s, "end" e FROM {t}' for t in ops if t in tables)
    first, last = raw(path, f"SELECT min(s), max(e) FROM ({union})")[0]
    prof = loaded(str(path))
    its = prof.iterations()
    window = its["end_ns"].max() - its["start_ns"].min()
    assert window > last - first
    line = dict(prof.report()["notes"].iter_rows())["timeline_shown"]
    assert f"{window / 1e9:.3f} s" in line and "of the GPU's" not in line
    assert f"active span, first to last GPU op, is {(last - first) / 1e9:.3f} s" in line


def test_diff_of_totals_warns_when_no_kernel_is_shared():
    """Two unrelated programs without a loop (SIGMA's line fitting, a vecAdd): diff falls back to whole-profile
    totals, and as with iterations it warns that no kernel (by the raw rows' names) runs in both."""
    a, b = (_public_export(n) for n in ("Baardrw__SIGMA__report2.sqlite", "Lianhang666__gpu4__report2.sqlite"))
    names = [
        {
            n
            for (n,) in raw(
                p,
                "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName",
            )
        }
        for p in (a, b)
    ]
    assert names[0] and names[1] and not names[0] & names[1]
    res = loaded(str(a)).diff(loaded(str(b)))
    assert res.iteration_time is None
    warnings = [v for k, v in res.notes.iter_rows() if k == "warning"]
    assert any("0% of" in w and "kernels both run" in w for w in warnings), warnings
