"""Kernel categories and tensor cores (queries/v1/canonical/44_kernel_rules.sql) on kernel names of real exports,
`kernels --by category`, and the finding about matrix kernels on CUDA cores."""

from __future__ import annotations

import re

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, PUBLIC, fixture, h200, loaded

from nsysql.cli import main


def _public(name: str):
    p = PUBLIC / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


# (export, start of a demangled kernel name in it, category, tensor_cores): what the kernel is known to do
NAMED = [
    ("train_small", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8", "gemm", "no"),  # FFMA despite xmma
    ("train_small", "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn", "gemm", "no"),
    ("train_small", "void cublasLt::splitKreduce_kernel<", "gemm", "no"),
    ("train_small", "void at::native::<unnamed>::multi_tensor_apply_kernel<", "optimizer", "no"),
    ("train_small", "void at::native::reduce_kernel<", "reduction", "no"),
    ("train_small", "void <unnamed>::softmax_warp_forward<", "softmax", "no"),
    ("train_small", "void <unnamed>::softmax_warp_backward<", "softmax", "no"),
    (
        "train_small",
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>",
        "copy",
        "no",
    ),
    (
        "train_small",
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::GeluCUDAKernelImpl",
        "elementwise",
        "no",
    ),
    ("train_small", "void at::native::<unnamed>::nll_loss_forward_reduce_cuda_kernel_2d<", "reduction", "no"),
    ("big_step", "void at::native::<unnamed>::vectorized_layer_norm_kernel<", "norm", "no"),
    ("big_step", "void at::native::<unnamed>::GammaBetaBackwardCUDAKernelTemplate<", "norm", "no"),
    ("ddp_pair/rank0", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication", "no"),
    ("ddp_pair/rank0", "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<", "copy", "no"),
    ("h200/syncmem", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "gemm", "yes"),
    ("h200/syncmem", "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda", "copy", "no"),
    ("public/NVIDIA__Fuser__report1", "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NTN", "gemm", "yes"),
    ("public/NVIDIA__Fuser__report1", "<unnamed>::nvfuser_pointwise_f0_c1_r0_g0", "elementwise", "unknown"),
    (
        "public/wenscarl__cutlass_benchmark__report1",
        "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<",
        "gemm",
        "yes",
    ),  # MmaTensorOp in its template arguments
    ("public/LeiWang1999__memfusion_artifact__report1", "trt_ampere_h16816gemm_64x64", "gemm", "yes"),
    (
        "public/LeiWang1999__memfusion_artifact__report1",
        "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc",
        "conv",
        "yes",
    ),
    ("public/LeiWang1999__memfusion_artifact__report1", "sm50_xmma_pooling_coalescedC", "reduction", "no"),
    ("public/MohanadOdema__DLProf__nsys_profile", "void cudnn::detail::implicit_convolve_sgemm<", "conv", "no"),
    ("public/MohanadOdema__DLProf__nsys_profile", "volta_sgemm_32x32_sliced1x4_tn", "gemm", "no"),
    ("public/MohanadOdema__DLProf__nsys_profile", "volta_scudnn_winograd_128x128", "conv", "no"),
    ("public/GindaChen__nsys-ai__h100_2gpu_1s", "void at::native::vectorized_gather_kernel<", "elementwise", "no"),
]


def _path(where: str):
    if where.startswith("h200/"):
        return h200(where[5:] + ".sqlite")
    if where.startswith("public/"):
        return _public(where[7:] + ".sqlite")
    if "/" in where:
        return FIXTURES / f"{where}.sqlite"
    return fixture(where)


@pytest.mark.parametrize("where,start,category,tensor_cores", NAMED, ids=[f"{w}:{s[:40]}" for w, s, *_ in NAMED])
def test_named_kernels(where, start, category, tensor_cores):
    k = loaded(str(_path(where))).kernels().filter(pl.col("name").str.starts_with(start))
    assert k.height >= 1, f"no kernel named {start}... in {where}"
    assert set(k["category"]) == {category}
    assert set(k["tensor_cores"]) == {tensor_cores}


def test_rules_first_match_by_priority():
    """Names no export here holds, through the rules table as documented: the first matching rule by priority."""
    prof = loaded(str(fixture("train_small")))
    cases = {
        "triton_poi_fused_add_mul_0": ("elementwise", "unknown"),
        "triton_red_fused_sum_1": ("reduction", "unknown"),
        "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_execute_kernel": (
            "gemm",
            "yes",
        ),
        "ampere_sgemm_128x64_tn": ("gemm", "no"),
        "volta_h884gemm_64x64_ldg8_nn": ("gemm", "yes"),
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>": (
            "attention",
            "yes",
        ),
        "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x3_nn_align8": ("gemm", "yes"),
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
        "__5x_cublas": ("gemm", "yes"),
        "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>": ("gemm", "no"),
        "cutlass::Kernel2<cutlass_80_simt_dgemm_128x64_8x5_nn_align1>": ("gemm", "no"),
        "sm80_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize64x64x16_stage3_warpsize2x2x1_dmma_execute_kernel": (
            "gemm",
            "unknown",
        ),
        "some_custom_kernel": (None, None),
    }
    assert prof.sql("SELECT count(*) FROM kernel_rules WHERE pattern <> lower(pattern)").item() == 0
    for name, want in cases.items():
        got = prof.sql(
            f"SELECT category, tensor_cores FROM kernel_rules WHERE regexp_matches(lower('{name}'), "
            "pattern) ORDER BY priority LIMIT 1"
        ).rows()
        assert (got[0] if got else (None, None)) == want, name


BY_CATEGORY = ["train_small", "ddp_pair/rank0", "public/NVIDIA__Fuser__report1"]


@pytest.mark.parametrize("where", BY_CATEGORY)
def test_by_category_sums_the_kernels_table(where):
    prof = loaded(str(_path(where)))
    k = prof.kernels()
    by = prof.kernels(by="category")
    assert by.columns == ["category", "tensor_cores", "count", "total_ns", "pct", "evidence"]
    assert set(by["evidence"]) == {"name"}  # none of these exports has GPU metrics
    expect = (
        k.group_by("category", "tensor_cores")
        .agg(pl.col("count").sum(), pl.col("total_ns").sum())
        .sort("category", "tensor_cores")
    )
    assert (
        by.select("category", "tensor_cores", "count", "total_ns").sort("category", "tensor_cores").rows()
        == expect.rows()
    )
    total = prof.sql("SELECT sum(duration_ns), count(*) FROM gpu_ops WHERE kind = 'kernel'").row(0)
    assert (by["total_ns"].sum(), by["count"].sum()) == total
    assert by["pct"].sum() == pytest.approx(100.0)


def test_cli_by_category():
    r = CliRunner().invoke(
        main, ["kernels", "--by", "category", "--format", "csv", str(fixture("train_small"))], catch_exceptions=False
    )
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert lines[0] == "category,tensor_cores,count,total_ns,pct,evidence"
    assert lines[1].startswith("gemm,no,")


NO_TENSOR_CORES = re.compile(r"ffma|simt_sgemm|sgemm_|splitKreduce|cublasLt::epilogue|scal_kernel")


def test_finding_on_fp32_matmuls():
    """train_small is an fp32 MLP without TF32 (fixtures/workloads/train_steps.py): its matrix products run
    on CUDA cores, FFMA/SIMT kernels by name, and they are most of its kernel time."""
    prof = loaded(str(fixture("train_small")))
    k = prof.kernels()
    share = 100 * k.filter(pl.col("name").str.contains(NO_TENSOR_CORES.pattern))["total_ns"].sum() / k["total_ns"].sum()
    assert share >= 10
    f = prof.findings().filter(pl.col("finding") == "matrix math without tensor cores")
    assert f.height == 1
    ev = f["evidence"][0]
    assert ev.startswith(f"{share:.0f}% of kernel time")
    assert "allow_tf32 = True" in ev and 'set_float32_matmul_precision("high")' in ev and "bf16 autocast" in ev


@pytest.mark.parametrize("where", ["public/NVIDIA__Fuser__report1", "public/wenscarl__cutlass_benchmark__report1"])
def test_no_finding_with_tensor_core_gemms(where):
    prof = loaded(str(_path(where)))
    assert prof.kernels().filter(pl.col("name").str.contains("nvjet|MmaTensorOp")).height >= 1
    assert "matrix math without tensor cores" not in prof.findings()["finding"].to_list()


@pytest.mark.parametrize("major, minor, flips", [(6, 1, True), (7, 0, False)])
def test_no_kernel_uses_tensor_cores_on_a_gpu_without_them(tmp_path, major, minor, flips):
    """loader_cpu_before's kernels on a GPU of compute capability major.minor (TARGET_INFO_GPU crafted; 9.0 as
    recorded): below 7.0 the GPU has no tensor cores, so every kernel is `no` whatever its name says (its
    tensor-core GEMMs were `yes`); from 7.0 the names decide as before. Totals and categories do not move."""
    from conftest import craft, raw

    src = fixture("loader_cpu_before")
    assert raw(src, "SELECT DISTINCT computeMajor FROM TARGET_INFO_GPU") == [(9,)]
    before = loaded(str(src)).kernels()
    assert (before["tensor_cores"] == "yes").sum() > 0
    path = craft(
        tmp_path / "cc.sqlite",
        ("UPDATE TARGET_INFO_GPU SET computeMajor = ?, computeMinor = ?", (major, minor)),
        source="loader_cpu_before",
    )
    after = loaded(str(path)).kernels()
    assert after.drop("tensor_cores").equals(before.drop("tensor_cores"))
    if flips:
        assert set(after["tensor_cores"]) == {"no"}
    else:
        assert after["tensor_cores"].to_list() == before["tensor_cores"].to_list()


@pytest.mark.parametrize("name", ["extra-p__extrap__profile1.sqlite", "extra-p__extrap__con_kernel.sqlite"])
def test_kernels_on_pascal_use_no_tensor_cores(name):
    """Extra-P's exports ran on a GeForce GTX 1060 (compute capability 6.1; the other GPUs listed, an iGPU and a
    software renderer, have none): their kernels, whose names say nothing of tensor cores (`unknown` by name),
    are `no`."""
    from conftest import raw

    path = _public(name)
    assert {r[0] for r in raw(path, "SELECT computeMajor FROM TARGET_INFO_GPU WHERE computeMajor > 0")} == {6}
    assert set(loaded(str(path)).kernels()["tensor_cores"]) == {"no"}
