"""A command whose analysis does not apply to an export says why in one line and exits 2, as `info` says it,
instead of printing an empty answer ("no kernels") with exit status 0."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import craft

import nsysql
from nsysql.analyses import catalog  # noqa: F401 (fills the registry)
from nsysql.cli import main
from nsysql.engine import REGISTRY

NO_GPU = [f"DELETE FROM {t}" for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")]


def test_why_not_reads_every_table_an_analysis_requires():
    """...or the smaller one that says whether it holds rows (info.PROBES: the GPU metrics' counts)."""
    from nsysql.analyses.info import PROBES

    required = {PROBES.get(t, t) for a in REGISTRY.values() for r in a.requires for t in r.split("|")}
    assert required <= set(REGISTRY["why_not"].tables)


def test_an_export_whose_gpu_activity_is_missing_refuses_kernels_and_launches(tmp_path):
    """train_small without its kernels, copies and memsets: its CUDA API calls are there, its GPU work is not."""
    path = craft(tmp_path / "no_gpu.sqlite", *NO_GPU)
    prof = nsysql.load(path, cache_dir=tmp_path / "c")
    assert prof.kernels().height == 0  # the library still answers, with an empty frame
    why = prof.why_not("kernels")
    assert (
        why.startswith("no GPU work (kernels, copies, memsets)") and "holds CUDA API calls but no GPU activity" in why
    )
    assert prof.why_not("api") == ""
    # what the commands show refuses in the library, in the line they print: kernels' view, and any analysis
    # through Profile.shown; one that applies is answered
    for shown in (prof.kernels_shown, lambda: prof.shown("launches")):
        with pytest.raises(nsysql.NsysqlError) as e:
            shown()
        assert str(e.value) == why
    assert prof.shown("api").to_dicts() == prof.api().to_dicts() != []
    prof.close()
    for cmd in ("kernels", "launches"):
        res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), cmd, str(path)])
        assert res.exit_code == 2, res.output
        assert res.stdout == ""
        assert res.stderr == f"nsysql: error: {path}: {why}\n", res.stderr
    res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), "api", str(path)])
    assert res.exit_code == 0 and "cudaLaunchKernel" in res.stdout


def test_an_export_without_cuda_trace_says_so(tmp_path):
    path = craft(tmp_path / "no_cuda.sqlite", *NO_GPU, "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    for cmd, said in (("kernels", "holds no CUDA trace (captured without -t cuda"), ("api", "no CUDA API calls")):
        res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), cmd, str(path)])
        assert res.exit_code == 2 and said in res.stderr, res.stderr


def test_an_empty_answer_of_an_analysis_that_applies_is_printed(tmp_path):
    """train_small without its kernels still has GPU work (its copies): no kernels is an answer, not a refusal."""
    path = craft(tmp_path / "copies_only.sqlite", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), "kernels", str(path)])
    assert res.exit_code == 0 and res.stdout.strip() == "no kernels", res.output
