"""Facts a verdict rests on, true on every GPU and nsys version (issue 31): memory kinds of copies, compute
capability and frameworks behind the advice, and the capture switch that would answer what an export cannot."""

from __future__ import annotations

import shutil
import sqlite3

import polars as pl
import pytest
from conftest import PUBLIC, fixture, loaded, public_exports

# nsys's own numbering of srcKind/dstKind/memKind, as ENUM_CUDA_MEM_KIND names ids 0-3 in every export that has
# it and nsys 2021.1's stats scripts decoded them (MEM_KIND_STRS_CTE): the same ids in every version
NSYS_MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array"}
HTOD, DTOH = 1, 2  # CUPTI_ACTIVITY_KIND_MEMCPY.copyKind


def public(name: str):
    p = PUBLIC / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def raw_copies(path) -> list[tuple[int, int, int, int, int]]:
    """(copyKind, srcKind, dstKind, count, bytes) of the export's memcpy rows, read with Python's sqlite3."""
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute(
            "SELECT copyKind, srcKind, dstKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3"
        ).fetchall()


def decoded_copies(path) -> dict[tuple[str, str, str], tuple[int, int]]:
    got = loaded(str(path)).sql(
        "SELECT copy_kind::VARCHAR, src_kind::VARCHAR, dst_kind::VARCHAR, count(*), sum(bytes)::BIGINT "
        "FROM gpu_ops WHERE kind = 'memcpy' GROUP BY ALL"
    )
    return {r[:3]: r[3:] for r in got.iter_rows()}


def has_table(path, table: str) -> bool:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


DIRECTION = {HTOD: "Host-to-Device", DTOH: "Device-to-Host"}


@pytest.mark.parametrize(
    "name, want",
    [
        # OpenACC k-means (nsys of HPC SDK 21.2): pinned buffers both ways
        ("martisu1631998__kmeans-parallel__report2.sqlite", {("Host-to-Device", "Pinned", "Device")}),
        # 2020.3.4 (OpenMP offload on V100s) and 2021.2.1: plain pageable cudaMemcpy both ways
        ("lockfuehrer__beast_ressoruces__report2.sqlite", {("Host-to-Device", "Pageable", "Device")}),
        ("bwyogatama__Mordred-Deprecated__report1.sqlite", {("Host-to-Device", "Pageable", "Device")}),
    ],
)
def test_copies_of_exports_without_the_enum_decode_by_nsys_numbering(name, want):
    """Exports without ENUM_CUDA_MEM_KIND store nsys's numbering (0 Pageable, 1 Pinned, 2 Device), not CUPTI's
    (where 2 is Pinned and 3 Device): each raw (copyKind, srcKind, dstKind) group is decoded by it, bytes and
    counts kept; and a copy between host and device has the device at its device end, true by construction."""
    path = public(name)
    assert not has_table(path, "ENUM_CUDA_MEM_KIND")
    raw = raw_copies(path)
    want_all = {(DIRECTION[c], NSYS_MEM_KINDS[s], NSYS_MEM_KINDS[d]): (n, b) for c, s, d, n, b in raw if c in DIRECTION}
    got = decoded_copies(path)
    assert got == want_all
    assert want <= set(got)
    for (direction, src, dst), _ in got.items():
        assert (dst if direction == "Host-to-Device" else src) == "Device"
        assert (src if direction == "Host-to-Device" else dst) in ("Pageable", "Pinned")


def test_pinned_copies_are_no_pageable_finding():
    """k-means copies 1,613.7 MiB host-to-device from pinned memory (raw srcKind 1): no pageable finding."""
    path = public("martisu1631998__kmeans-parallel__report2.sqlite")
    htod = [r for r in raw_copies(path) if r[0] == HTOD]
    assert {(s, d) for _, s, d, _, _ in htod} == {(1, 2)}
    findings = loaded(str(path)).findings()
    assert "pageable host-to-device copies" not in findings["finding"].to_list()


def test_pageable_copies_are_found_in_an_export_without_the_enum():
    """beast_ressoruces (2020.3.4) copies 118 MiB device-to-host and 4 bytes host-to-device from pageable memory:
    the host-to-device bytes are far under the finding's 1 MiB, so summary's memory table shows them and no
    finding is made; Mordred's 45 pageable host-to-device copies are 123 KiB, also under it."""
    for name in ("lockfuehrer__beast_ressoruces__report2.sqlite", "bwyogatama__Mordred-Deprecated__report1.sqlite"):
        path = public(name)
        prof = loaded(str(path))
        raw = [r for r in raw_copies(path) if r[0] == HTOD and r[1] == 0]
        pc = prof.sql(
            "SELECT count(*), sum(bytes)::BIGINT FROM gpu_ops WHERE kind = 'memcpy' "
            "AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable'"
        ).row(0)
        assert pc == (sum(r[3] for r in raw), sum(r[4] for r in raw)) and pc[0] > 0


@pytest.mark.parametrize("path", public_exports(), ids=lambda p: p.name[:40])
def test_host_device_copies_have_the_device_at_their_device_end(path):
    """In every public export, 2020.3 to 2026.2, with or without the enum: a host-to-device copy writes device
    memory and a device-to-host copy reads it. (CUPTI's numbering, the old fallback, made them Pinned.)"""
    got = loaded(str(path)).sql(
        "SELECT copy_kind::VARCHAR, src_kind::VARCHAR, dst_kind::VARCHAR FROM gpu_ops "
        "WHERE copy_kind IN ('Host-to-Device', 'Device-to-Host') GROUP BY ALL"
    )
    for direction, src, dst in got.iter_rows():
        assert (dst if direction == "Host-to-Device" else src) == "Device", (direction, src, dst)


def _mutated_train_small(tmp_path, sql: str):
    dst = tmp_path / "train_small.sqlite"
    shutil.copyfile(fixture("train_small"), dst)
    with sqlite3.connect(dst) as db:
        db.executescript(sql)
    return dst


def test_exports_with_the_enum_decode_by_it(tmp_path):
    """train_small (nsys 2025) has ENUM_CUDA_MEM_KIND: a copy whose enum says id 0 is Pinned and id 1 Pageable (the
    labels swapped) decodes by that enum, not by any numbering nsysql knows."""
    import nsysql

    path = fixture("train_small")
    raw = raw_copies(path)
    assert has_table(path, "ENUM_CUDA_MEM_KIND") and {s for c, s, _, _, _ in raw if c == HTOD} == {0}
    swapped = _mutated_train_small(
        tmp_path,
        "UPDATE ENUM_CUDA_MEM_KIND SET label = CASE id WHEN 0 THEN 'Pinned' WHEN 1 THEN 'Pageable' ELSE label END;",
    )
    got = nsysql.load(str(swapped)).sql(
        "SELECT DISTINCT src_kind::VARCHAR FROM gpu_ops WHERE copy_kind = 'Host-to-Device'"
    )
    assert got.rows() == [("Pinned",)]
    assert {k[1] for k in decoded_copies(path) if k[0] == "Host-to-Device"} == {"Pageable"}


def test_an_export_without_its_enum_decodes_as_the_enum_said(tmp_path):
    """The same export with its ENUM_CUDA_MEM_KIND dropped decodes every copy and memset to the same kinds: ids 0-3
    mean the same in nsys's numbering before the enum and in it."""
    import nsysql

    q = (
        "SELECT kind::VARCHAR, copy_kind::VARCHAR, src_kind::VARCHAR, dst_kind::VARCHAR, count(*) "
        "FROM gpu_ops WHERE kind <> 'kernel' GROUP BY ALL ORDER BY ALL"
    )
    with_enum = loaded(str(fixture("train_small"))).sql(q).rows()
    without = nsysql.load(str(_mutated_train_small(tmp_path, "DROP TABLE ENUM_CUDA_MEM_KIND;"))).sql(q).rows()
    assert without == with_enum and any(r[2] == "Pageable" for r in with_enum)


# -- advice the hardware and the framework can take -------------------------------------------------------------

TENSOR = "matrix math without tensor cores"
PAGEABLE = "pageable host-to-device copies"


def finding(prof, name: str) -> str | None:
    f = prof.findings()
    if f.height == 0:
        return None
    rows = f.filter(f["finding"] == name)
    return rows["evidence"][0] if rows.height else None


def raw_capabilities(path) -> list[str]:
    """computeMajor.computeMinor of every GPU the export describes with one, read with Python's sqlite3."""
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return [f"{a}.{b}" for a, b in db.execute("SELECT computeMajor, computeMinor FROM TARGET_INFO_GPU") if a]


def test_sm75_gets_fp16_advice_never_tf32_or_bf16():
    """DLProf's RTX 2070 SUPER is sm_75 (TARGET_INFO_GPU): fp16 tensor cores only. Its conv/gemm kernels run on CUDA
    cores, and the advice is fp16 autocast, never TF32 or bf16 (neither has tensor cores there)."""
    path = public("MohanadOdema__DLProf__nsys_profile.sqlite")
    prof = loaded(str(path))
    assert raw_capabilities(path) == ["7.5"]
    assert prof.sql("SELECT compute_capability FROM devices").rows() == [("7.5",)]
    ev = finding(prof, TENSOR)
    assert ev is not None and "fp16 autocast" in ev and "sm_75" in ev
    for said in ("allow_tf32", "set_float32_matmul_precision", "bf16 autocast", "TF32 (", "TF32 math"):
        assert said not in ev


def _with_capability(tmp_path, path, major: int | None, minor: int = 0):
    """A copy of `path` whose GPUs say compute capability major.minor (None: the export describes no GPU)."""
    dst = tmp_path / path.name
    shutil.copyfile(path, dst)
    with sqlite3.connect(dst) as db:
        if major is None:
            db.execute("DROP TABLE TARGET_INFO_GPU")
        else:
            db.execute("UPDATE TARGET_INFO_GPU SET computeMajor = ?, computeMinor = ?", (major, minor))
    return dst


@pytest.mark.parametrize("major, minor", [(8, 0), (7, 0), (6, 1), (None, 0)], ids=["sm80", "sm70", "sm61", "unknown"])
def test_tensor_core_advice_follows_the_compute_capability(tmp_path, major, minor):
    """The same kernels (DLProf's, PyTorch) on GPUs of other compute capabilities: sm_80 gets TF32/bf16 advice,
    sm_70 fp16 autocast, sm_61 (no tensor cores) no finding at all, and a GPU the export does not describe only
    what is true of every GPU."""
    import nsysql

    path = public("MohanadOdema__DLProf__nsys_profile.sqlite")
    said = finding(nsysql.load(str(_with_capability(tmp_path, path, major, minor))), TENSOR)
    if major == 8:
        assert "allow_tf32 = True" in said and "bf16 autocast" in said
    elif major == 7:
        assert "fp16 autocast" in said and "sm_70" in said and "allow_tf32" not in said and "bf16 autocast" not in said
    elif major == 6:
        assert said is None
    else:
        assert "does not say which GPU" in said and "allow_tf32" not in said
        assert "from sm_70" in said and "from sm_80" in said


def test_no_pin_memory_advice_where_pytorch_did_not_run():
    """SC23 OpenMP tutorial (nvkernel_* offload kernels, no PyTorch name anywhere in the export): its 48,828 MiB
    of pageable copies get the CUDA advice, not PyTorch's pin_memory."""
    path = public("RajaATAli__SC23_Programming-Your-GPU-with-OpenMP_Tutorial__report3.sqlite")
    prof = loaded(str(path))
    assert "framework" not in prof.facts
    ev = finding(prof, PAGEABLE)
    assert ev is not None and "pin_memory" not in ev and "cudaHostRegister" in ev and "cudaHostAlloc" in ev


@pytest.mark.parametrize(
    "name",
    [
        "extra-p__extrap__con_kernel.sqlite",
        "extra-p__extrap__profile1.sqlite",
        "extra-p__extrap__ex-gpu.s10.sqlite",
        "lockfuehrer__beast_ressoruces__report2.sqlite",
        "RajaATAli__SC23_Programming-Your-GPU-with-OpenMP_Tutorial__report3.sqlite",
    ],
)
def test_openmp_and_extra_p_exports_never_mention_pytorch(name):
    """OpenMP-offload and Extra-P exports: no framework found, and nothing summary says names PyTorch."""
    from click.testing import CliRunner

    from nsysql.cli import main

    path = public(name)
    assert "framework" not in loaded(str(path)).facts
    res = CliRunner().invoke(main, ["summary", "-f", "csv", str(path)])
    assert res.exit_code == 0 and "pin_memory" not in res.output and "torch" not in res.output


def test_train_small_keeps_its_pytorch_advice():
    """train_small (H200, sm_90, PyTorch): the two findings say what they said before the advice was conditioned."""
    prof = loaded(str(fixture("train_small")))
    assert prof.facts["framework"] == ["PyTorch"]
    assert prof.sql("SELECT compute_capability FROM devices").rows() == [("9.0",)]
    assert finding(prof, PAGEABLE).endswith(
        ": pinned host memory (cudaHostAlloc, or pin_memory=True in PyTorch) makes them asynchronous"
    )
    assert finding(prof, TENSOR).endswith(
        "; sm_90 has TF32 and bf16 tensor cores: TF32 (torch.backends.cuda.matmul.allow_tf32 = True, or "
        'torch.set_float32_matmul_precision("high")) or bf16 autocast moves them to tensor cores'
    )


@pytest.mark.parametrize(
    "name, example",
    [
        ("train_small", "pt_autograd_0"),  # PyTorch's autograd thread (ThreadNames)
        ("MohanadOdema__DLProf__nsys_profile.sqlite", "aten::"),  # emit_nvtx operator ranges (inline NVTX text)
        ("CO18326__uvmTorch__report1.sqlite", "libtorch"),  # no GPU work; libtorch libraries loaded (OSRT)
    ],
)
def test_pytorch_is_found_by_names_the_export_holds(name, example):
    """The framework fact names its evidence, and the example it gives is in the export: in StringIds, or an NVTX
    range's own text (read here with Python's sqlite3)."""
    path = fixture(name) if name == "train_small" else public(name)
    facts = loaded(str(path)).facts
    assert facts["framework"] == ["PyTorch"]
    (ev,) = [e for e in facts["framework_evidence"] if e.startswith("PyTorch: ")]
    shown = ev.split("e.g. `", 1)[1][:-1]
    assert example in shown
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        held = db.execute("SELECT count(*) FROM StringIds WHERE value = ?", (shown,)).fetchone()[0]
        if not held and has_table(path, "NVTX_EVENTS"):
            held = db.execute("SELECT count(*) FROM NVTX_EVENTS WHERE text = ?", (shown,)).fetchone()[0]
    assert held


def test_a_cpp_program_that_only_names_libtorch_in_its_environment_is_not_pytorch():
    """Jorgedavyd/cuda: a CUDA C++ program whose environment (CPLUS_INCLUDE_PATH) names libtorch's include folder;
    no libtorch library, function, kernel, range or thread: no framework."""
    path = public("Jorgedavyd__cuda__report4.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        assert db.execute("SELECT count(*) FROM StringIds WHERE value LIKE '%libtorch%'").fetchone()[0] == 1
    assert "framework" not in loaded(str(path)).facts


# -- what the export cannot answer, and the switch that would ---------------------------------------------------


def cannot_answer(path) -> dict[str, str]:
    df = loaded(str(path)).info()
    rows = df.filter(df["section"] == "cannot answer")
    return {v.split("`nsys profile ", 1)[1].split("`", 1)[0]: v for v in rows["value"].to_list()}


def rows_in(path, table: str) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            return 0
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


CAPTURE_CASES = [
    fixture("train_small"),  # -s none --cpuctxsw=none, PyTorch without op ranges, one traced process
    fixture("hw_mix"),  # GPU metrics sampled
    fixture("jitter_before"),  # DataLoader workers spawned: traced, 4 processes
    PUBLIC / "extra-p__extrap__ex-gpu.s10.sqlite",  # CPU samples and scheduling events
    PUBLIC / "MohanadOdema__DLProf__nsys_profile.sqlite",  # PyTorch with emit_nvtx op ranges
    PUBLIC / "RajaATAli__SC23_Programming-Your-GPU-with-OpenMP_Tutorial__report3.sqlite",  # OpenMP, no PyTorch
]


@pytest.mark.parametrize("path", CAPTURE_CASES, ids=lambda p: p.name[:40])
def test_info_names_the_switch_for_what_the_export_lacks(path):
    """Each capture rule of `info` holds exactly where its table is absent or empty in the export (counted here with
    Python's sqlite3); the PyTorch rules where PyTorch ran without op ranges, or with one traced process."""
    if not path.exists():
        pytest.skip(f"{path} not present")
    got = cannot_answer(path)
    kernels = rows_in(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    gpu_work = kernels + rows_in(path, "CUPTI_ACTIVITY_KIND_MEMCPY") + rows_in(path, "CUPTI_ACTIVITY_KIND_MEMSET")
    assert ("-s process-tree" in got) == (rows_in(path, "COMPOSITE_EVENTS") == 0)
    assert ("--cpuctxsw=process-tree" in got) == (rows_in(path, "SCHED_EVENTS") == 0)
    assert ("--gpu-metrics-devices=all" in got) == (kernels > 0 and rows_in(path, "GPU_METRICS") == 0)
    assert ("--cuda-memory-usage=true" in got) == (gpu_work > 0 and rows_in(path, "CUDA_GPU_MEMORY_USAGE_EVENTS") == 0)
    want_pytorch = {
        "train_small": {"--trace-fork-before-exec=true", "--pytorch=autograd-shapes-nvtx"},
        "hw_mix": {"--trace-fork-before-exec=true", "--pytorch=autograd-shapes-nvtx"},
        "jitter_before": {"--pytorch=autograd-shapes-nvtx"},
        "MohanadOdema__DLProf__nsys_profile": {"--trace-fork-before-exec=true"},
    }.get(path.stem, set())
    assert {s for s in got if s in ("--trace-fork-before-exec=true", "--pytorch=autograd-shapes-nvtx")} == want_pytorch


def test_analyses_that_do_not_apply_name_the_switch():
    """`ops` on an export without operator ranges and `metrics` on one without GPU metrics: one line on stderr
    naming the file and the capture switch that would have recorded the answer."""
    from click.testing import CliRunner

    from nsysql.cli import main

    path = str(fixture("train_small"))
    for cmd, switch in (("ops", "--pytorch=autograd-shapes-nvtx"), ("metrics", "--gpu-metrics-devices=all")):
        res = CliRunner().invoke(main, [cmd, path])
        assert res.exit_code != 0 and "Traceback" not in res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and path in lines[0] and f"`nsys profile {switch}`" in lines[0]


# -- which GPU a CUDA device id is ------------------------------------------------------------------------------


def _with_second_gpu(tmp_path, sql: str):
    """train_small (one H200, GPU id 0 = CUDA device 0) with a second GPU described: id 1, sm_75, `Other GPU`."""
    return _mutated_train_small(
        tmp_path,
        "CREATE TEMP TABLE g AS SELECT * FROM TARGET_INFO_GPU WHERE id = 0;"
        "UPDATE g SET id = 1, name = 'Other GPU', computeMajor = 7, computeMinor = 5, cuDevice = 1;"
        "INSERT INTO TARGET_INFO_GPU SELECT * FROM g;" + sql,
    )


def test_device_ids_follow_target_info_cuda_device(tmp_path):
    """TARGET_INFO_CUDA_DEVICE maps the process's CUDA device 0 (every kernel's deviceId) to GPU 1: device 0 is that
    GPU, its name and compute capability, and the tensor-core advice is sm_75's."""
    import nsysql

    path = _with_second_gpu(tmp_path, "UPDATE TARGET_INFO_CUDA_DEVICE SET gpuId = 1 WHERE cudaId = 0;")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall() == [(0,)]
    prof = nsysql.load(str(path))
    assert prof.sql("SELECT device_id, name, compute_capability FROM devices").rows() == [(0, "Other GPU", "7.5")]
    assert "fp16 autocast" in finding(prof, TENSOR) and "allow_tf32" not in finding(prof, TENSOR)


def test_compute_capability_abstains_where_id_and_cudevice_disagree(tmp_path):
    """Without TARGET_INFO_CUDA_DEVICE, GPU 0 (sm_90) has id 0 but cuDevice 1, GPU 1 (sm_75) cuDevice 0: either may
    be CUDA device 0, and they differ, so its compute capability is not said (nor advice that depends on it)."""
    import nsysql

    path = _with_second_gpu(
        tmp_path,
        "DROP TABLE TARGET_INFO_CUDA_DEVICE; UPDATE TARGET_INFO_GPU SET cuDevice = CASE id WHEN 0 THEN 1 ELSE 0 END;",
    )
    prof = nsysql.load(str(path))
    assert prof.sql("SELECT device_id, name, compute_capability FROM devices").rows() == [
        (0, "NVIDIA H200", None),
        (1, "Other GPU", None),
    ]
    assert "does not say which GPU" in finding(prof, TENSOR)


def test_idle_the_main_thread_computes_through_is_host_bound_without_a_range():
    """saxpy-mpi (Perlmutter, nsys 2022.2) times its loop by `saxpy` marks (a delimiter loop): its steps' long
    gaps fall between ranges, cause `unknown`, while its scheduling events have the main thread on a CPU through
    them (CPU samples in `main`). That is host work: the finding `host bound`, first, giving back that idle per
    typical step. No finding named it, and `fix first` was the pageable copies, a fifth of its size."""
    prof = loaded(str(public("hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite")))
    its = prof.iterations()
    typical = its.filter(~pl.col("warmup") & ~pl.col("outlier"))["iteration"]
    gaps = prof.gaps().filter(pl.col("iteration").is_in(typical.implode()))
    unknown = gaps.filter(pl.col("cause") == "unknown")["duration_ns"].sum()
    assert unknown >= 0.5 * gaps["duration_ns"].sum()
    f = prof.findings()
    top = f.row(0, named=True)
    assert top["finding"] == "host bound" and "(cause `unknown`)" in top["evidence"]
    assert "the main thread was on a CPU for 100% of it" in top["evidence"]
    assert top["headroom_ms"] == pytest.approx(unknown / typical.len() / 1e6, abs=1e-3)
    assert prof.summary()["facts"].row(0, named=True)["value"].startswith("host bound: ")
