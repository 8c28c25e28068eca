"""What `kernels --by category` (per iteration, per range), its category and tensor_cores columns say, checked
against the raw rows of real exports (read here with sqlite3) and facts true by construction of crafted copies of
the fixtures."""

from __future__ import annotations

import json

from conftest import built_cache, craft, fixture, h200, raw


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
    # with no kernel at all (its copies kept), `no kernels` is the true answer, as `--by category` gives it
    bare = craft(tmp_path / "no_kernels.sqlite", "DROP TABLE NVTX_EVENTS", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert raw(bare, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0] > 0
    for per in ((), ("--per", "range")):
        r = _cli("kernels", "--by", "category", *per, bare)
        assert (r.exit_code, r.output) == (0, "no kernels\n"), r.output


def test_several_files_refuse_an_export_without_gpu_activity_as_one_file_does(tmp_path):
    """train_small without its kernels and copies: `kernels` on it alone refuses (no GPU activity recorded).
    Beside another export its rank was left out of the table without a word; it is refused the same way, as
    `iterations` and `gaps` over several files refuse an export they do not apply to."""
    bare = craft(
        tmp_path / "no_gpu.sqlite", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    )
    cache = built_cache(tmp_path / "cache", fixture("train_small"))
    alone = _one_line_refusal(_cli("--cache-dir", cache, "kernels", bare), bare)
    assert "no GPU activity" in alone
    r = _cli("--cache-dir", cache, "kernels", fixture("train_small"), bare)
    assert r.exit_code == 2 and r.stderr.splitlines()[-1] == alone, r.output


def test_several_files_say_a_rank_with_copies_but_no_kernel_has_none(tmp_path):
    """train_small without its kernels, its copies kept: alone, `kernels` answers `no kernels` (exit 0). Beside
    another export its rank added no row and no word; its line under the table now says the same."""
    bare = craft(tmp_path / "copies_only.sqlite", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert raw(bare, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0] > 0
    cache = built_cache(tmp_path / "cache", fixture("train_small"))
    r = _cli("--cache-dir", cache, "kernels", fixture("train_small"), bare)
    assert r.exit_code == 0, r.output
    ranks = {line.split()[0] for line in r.stdout.splitlines()[2:] if line.strip()[:1].isdigit()}
    said = [line for line in r.stdout.splitlines() if line.startswith("rank ") and "):" in line]
    # ranks are numbered by sorted path (which of the two comes first depends on where the run's folders lie):
    # one rank has rows, the other only its line
    (other,) = {"0", "1"} - ranks
    assert len(ranks) == 1 and said == [f"rank {other} (copies_only.sqlite): no kernels"], r.stdout


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


# (a kernel name of a library the fixtures do not use, its category and tensor_cores): what the kernel is known to
# do, from the library's source; each replaces the name of one of train_small's kernels in a crafted copy
RENAMED = [
    # FlashAttention 2's split-KV combine: a log-sum-exp weighted sum of partial outputs, no matrix product
    (
        "void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<(int)128, (int)64, (int)128, (int)4, (bool)0, "
        "(bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)64, (int)128, (int)4, "
        "cutlass::bfloat16_t>>, (int)4, (int)1, (bool)1>(Flash_fwd_params)",
        "attention",
        "unknown",
    ),
    # its backward's dot(dO, O) per row
    (
        "void flash_bwd_dot_do_o_kernel<(bool)1, Flash_bwd_kernel_traits<(int)128>>(Flash_bwd_params)",
        "attention",
        "unknown",
    ),
    # the attention itself stays a tensor-core kernel
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4>>(Flash_fwd_params)",
        "attention",
        "yes",
    ),
    # FlashInfer: an RMS norm (no attention), and a decode kernel that runs on CUDA cores
    (
        "void flashinfer::norm::RMSNormKernel<(unsigned int)8, __nv_bfloat16>(T2 *, T2 *, T2 *, unsigned int)",
        "norm",
        "no",
    ),
    (
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, (unsigned int)2, "
        "(unsigned int)2, (unsigned int)8>(flashinfer::BatchDecodeParams)",
        "attention",
        "unknown",
    ),
    # a Hadamard transform says `adam`: no optimizer
    ("void hadamard_transform_kernel<(int)128, (int)8, float>(HadamardParamsBase)", "other", "unknown"),
    # cuDNN's int8x4 (DP4A) convolutions on CUDA cores, plain and in TensorRT: their `relu` is a fused epilogue
    ("trt_ampere_fp32_icudnn_int8x4_128x128_relu_xregs_large_nn_v1", "conv", "no"),
    ("volta_int8x4_icudnn_128x128_relu_small_nn_v1", "conv", "no"),
    # fp64: cuBLAS may run it on tensor cores (DMMA) from sm80; a kernel named for Volta has none to run on
    ("ampere_zgemm_32x32_nn", "gemm", "unknown"),
    ("volta_zgemm_32x32_nn", "gemm", "no"),
    # TensorRT's int8 layout conversion
    ("void cuInt8::nchwTonchhw2<float>(const float *, signed char *, int, int, int, int, float)", "copy", "no"),
    # a program's own kernel whose name ends in gpu_kernel says nothing of what it computes
    ("spmv_csr_gpu_kernel(int, const int *, const int *, const float *, const float *, float *)", "other", "unknown"),
]


def test_library_names_get_the_category_and_tensor_cores_they_support(tmp_path):
    """FlashAttention's helper kernels were `attention, yes` (no MMA in them), FlashInfer's RMS norm and CUDA-core
    decode kernels `attention, yes`, a Hadamard transform `optimizer, no` (`hadamard` holds `adam`), cuDNN's int8x4
    convolutions `elementwise, no` (by their `relu`), Ampere's zgemm `no`, TensorRT's nchwToNchhw2 `other`, a
    program's `spmv_csr_gpu_kernel` `elementwise, no`: each now gets what its name supports, unknown where it says
    nothing."""
    import nsysql

    src = fixture("train_small")
    ids = [r[0] for r in raw(src, "SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1")]
    assert len(ids) >= len(RENAMED)
    updates = [("UPDATE StringIds SET value = ? WHERE id = ?", (name, i)) for (name, *_), i in zip(RENAMED, ids)]
    path = craft(tmp_path / "renamed.sqlite", *updates)
    got = {
        r["name"]: (r["category"], r["tensor_cores"])
        for r in nsysql.load(path, cache_dir=tmp_path / "c").kernels().iter_rows(named=True)
    }
    for name, category, tensor_cores in RENAMED:
        assert got[name] == (category, tensor_cores), name


def _kernel_names(path) -> set[str]:
    q = "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
    return {r[0] for r in raw(path, q)}


def test_diff_of_two_programs_gives_no_verdict():
    """train_small (an MLP, loop `Batch<i>`) against mem_growth (matrix products in `step <i>`): no kernel name in
    common (counted here from both exports) and differently named loops. diff said `mem_growth.sqlite is faster:
    mean steady-state iteration 8.13 -> 0.38 ms`, comparing two programs; it now gives no verdict and says why,
    and --fail-above refuses in one line rather than judge them."""
    base, new = fixture("train_small"), fixture("mem_growth")
    assert not _kernel_names(base) & _kernel_names(new)
    r = _cli("diff", "-f", "json", base, new)
    assert r.exit_code == 0, r.output
    verdict = {row["item"]: row["value"] for row in json.loads(r.output)["verdict"]}
    head = verdict["verdict"]
    assert head.startswith("no iteration-time verdict: iterations are `Batch` in train_small.sqlite but `step`")
    assert "only 0% of train_small.sqlite's kernel time and 0% of mem_growth.sqlite's" in head
    assert "faster" not in head and "slower" not in head
    r = _cli("diff", "--fail-above", "5", base, new)
    assert r.exit_code == 2 and "needs two profiles of one program" in r.output, r.output


def test_diff_of_one_program_keeps_its_verdict():
    """loop_before and loop_after are one program (fixtures/loop_after/COMMAND.md): most kernel names in common,
    the same loop; the verdict on the mean stands."""
    base, new = fixture("loop_before"), fixture("loop_after")
    assert len(_kernel_names(base) & _kernel_names(new)) >= len(_kernel_names(base)) // 2
    r = _cli("diff", "-f", "json", base, new)
    assert r.exit_code == 0, r.output
    head = {row["item"]: row["value"] for row in json.loads(r.output)["verdict"]}["verdict"]
    assert "mean iteration time" in head and not head.startswith("no iteration-time verdict")
