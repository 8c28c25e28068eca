"""Advice the hardware and the program can take, and the capture switch that answers what an export cannot.

What the advice rests on (`advice_facts.sql`): the compute capability of each GPU that ran kernels (devices, from
TARGET_INFO_GPU / TARGET_INFO_CUDA_GPU) and the frameworks the export shows (profile_facts `framework`, rules in
70_profile_facts.sql). Tensor cores, by compute capability (NVIDIA's CUDA programming guide, per architecture):
- sm_80 and later (Ampere, Hopper, Blackwell): TF32, bf16 and fp16 tensor cores;
- sm_70 to sm_75 (Volta, Turing): fp16 tensor cores only (no TF32, no bf16);
- below sm_70: none, so matrix math on CUDA cores is no finding there;
- unknown: only what holds on every GPU is said.

`CAPTURE_RULES` is the one table of "what this export cannot answer, and the switch of `nsys profile` that would":
each rule names the question, the switch and the evidence test (which table is absent or empty). `info` lists
the rules that hold; an analysis that cannot answer names its rule's switch in its one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ._sql import run

# What records NVTX ranges, for an answer that needs them where the export has none: nsys traces NVTX by default,
# so an export without ranges most often comes from a program that opens none, and the switch alone records nothing
NVTX_HINT = (
    "annotate the code with NVTX ranges (nvtxRangePush/nvtxRangePop, or the NVTX API of its language or framework) "
    "and profile with -t nvtx"
)

TF32_CC = 8.0  # TF32 and bf16 tensor cores from Ampere
FP16_CC = 7.0  # fp16 tensor cores from Volta
METRICS_CC = 7.5  # nsys samples GPU metrics on Turing (sm_75) and later GPUs only


@dataclass(frozen=True)
class Facts:
    """What the advice rests on: the compute capabilities (`major.minor`, None where the export does not say) of
    the GPUs that ran kernels, and the frameworks the export shows."""

    capabilities: tuple[str | None, ...]
    frameworks: tuple[str, ...]

    @property
    def pytorch(self) -> bool:
        return "PyTorch" in self.frameworks

    def lowest_cc(self) -> float | None:
        """The lowest compute capability among the GPUs that ran kernels; None if any is unknown (or none ran)."""
        if not self.capabilities or any(c is None for c in self.capabilities):
            return None
        return min(float(c) for c in self.capabilities)

    def sm(self) -> str:
        return "/".join(f"sm_{c.replace('.', '')}" for c in sorted(set(self.capabilities), key=float))


def facts(con, frame=None) -> Facts:
    """The Facts of advice_facts.sql's row (`frame`: that query's result, when the caller has it)."""
    row = (run(con, "advice_facts", device_id=None) if frame is None else frame).row(0, named=True)
    return Facts(tuple(row["capabilities"] or ()), tuple(row["frameworks"] or ()))


def none_has_tensor_cores(capabilities: tuple[str | None, ...]) -> bool:
    """Whether no GPU of `capabilities` has tensor cores: every one says its compute capability, each below
    sm_70. False where any is unknown, or where there are none to judge."""
    known = [float(c) for c in capabilities if c is not None]
    return bool(known) and len(known) == len(capabilities) and max(known) < FP16_CC


def tensor_core_advice(f: Facts) -> str | None:
    """The advice of `matrix math without tensor cores`, for the GPUs that ran the kernels; None where no GPU of
    them has tensor cores (every one below sm_70): the finding is then not made."""
    if none_has_tensor_cores(f.capabilities):
        return None
    cc = f.lowest_cc()
    if cc is None:
        return (
            "the export does not say which GPU ran them (no compute capability), so this holds only where the GPU "
            "has tensor cores: fp16 runs on them from sm_70, TF32 and bf16 from sm_80"
        )
    if cc >= TF32_CC:
        if f.pytorch:
            return (
                f"{f.sm()} has TF32 and bf16 tensor cores: TF32 (torch.backends.cuda.matmul.allow_tf32 = True, or "
                'torch.set_float32_matmul_precision("high")) or bf16 autocast moves them to tensor cores'
            )
        return (
            f"TF32 math ({f.sm()}: cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH)) or bf16/fp16 inputs "
            "move them to tensor cores"
        )
    if cc >= FP16_CC:
        if f.pytorch:
            return (
                f"{f.sm()} has fp16 tensor cores but none for TF32 or bf16: fp16 autocast "
                '(torch.autocast("cuda", dtype=torch.float16) with a GradScaler) moves them to tensor cores'
            )
        return (
            f"{f.sm()} has fp16 tensor cores but none for TF32 or bf16: fp16 inputs (cublasGemmEx with CUDA_R_16F, "
            "cuDNN in half precision) move them to tensor cores"
        )
    # some of the GPUs have tensor cores, some not
    return f"of these GPUs ({f.sm()}), those from sm_70 run fp16 on tensor cores, those from sm_80 TF32 and bf16 too"


def pinned_memory_advice(f: Facts) -> str:
    """How to pin the host memory of pageable copies: PyTorch's switch only where the export shows PyTorch."""
    if f.pytorch:
        return "pinned host memory (cudaHostAlloc, or pin_memory=True in PyTorch) makes them asynchronous"
    return "pinned host memory (cudaHostAlloc, or cudaHostRegister on an existing buffer) makes them asynchronous"


# what gives back the time of copies between host and device that kernels already run beside: none of it waits
# on them, so only fewer bytes over the bus do
COPY_LESS = "only copying less gives their time back (keep the data on the GPU across steps, or copy smaller dtypes)"

# what gives back the time that copies mostly run beside kernels leave with no kernel beside them (a copy issued
# just before the kernels it could hide behind runs alone until they start): issuing them earlier hides that time
# as overlapping would; copying less shortens all of it
HIDE_REST = (
    "issuing them earlier, while kernels run (a step's copies during the step before), hides the time with no "
    "kernel beside it; copying less (keep the data on the GPU across steps, or copy smaller dtypes) shortens all of "
    "it"
)


def copy_overlap_advice(f: Facts) -> str:
    """How to hide copies between host and device that run with no kernel beside them: issue them from pinned
    memory on a stream of their own (PyTorch's switch only where the export shows PyTorch), or copy less."""
    how = (
        "tensor.to(device, non_blocking=True) from pinned memory, on a torch.cuda.Stream of their own"
        if f.pytorch
        else "cudaMemcpyAsync from pinned memory on a stream other than the kernels'"
    )
    return (
        f"overlap them with compute ({how}, while the kernels of another step run) or copy less (keep the data on "
        "the GPU across steps, or copy smaller dtypes)"
    )


# -- capture advice ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holdings:
    """What the export holds, as the capture rules test it."""

    tables: frozenset[str]  # every table in the file (profile_facts tables_in_file)
    span_from: str  # which timed tables have events (profile_facts span_from)
    counts: dict  # table_counts.sql: kernels, NVTX ranges, GPU metrics samples, ...
    frameworks: tuple[str, ...]
    traced_processes: int  # processes with CUDA API calls, OS runtime calls or NVTX ranges
    op_ranges: int  # NVTX ranges named aten::... (PyTorch operator ranges)
    capabilities: tuple[str | None, ...] = ()  # of the GPUs that ran kernels (Facts.capabilities)


def _tensor_cores_possible(h: Holdings) -> bool:
    """Whether a GPU that ran kernels may have tensor cores: where none has, whether kernels used them is
    answered (no), and GPU metrics would not tell more."""
    return not none_has_tensor_cores(h.capabilities)


def _metrics_possible(h: Holdings) -> bool:
    """Whether nsys could sample GPU metrics on a GPU that ran kernels: Turing (sm_75) and later only, so not
    where every one states an older compute capability (METRICS_CC)."""
    known = [float(c) for c in h.capabilities if c is not None]
    return not (known and len(known) == len(h.capabilities) and max(known) < METRICS_CC)


@dataclass(frozen=True)
class CaptureRule:
    key: str
    question: str  # what cannot be answered
    switch: str  # the `nsys profile` switch that would answer it
    evidence: str  # the test, in words: which table is absent or empty
    holds: Callable[[Holdings], bool]


def _gpu_work(h: Holdings) -> bool:
    return h.counts.get("kernels", 0) + h.counts.get("memcpy", 0) + h.counts.get("memset", 0) > 0


CAPTURE_RULES: tuple[CaptureRule, ...] = (
    CaptureRule(
        "cpu_samples",
        "what the CPU ran while the GPU idled (call stacks of the threads)",
        "-s process-tree",
        "no CPU samples (COMPOSITE_EVENTS absent or empty)",
        lambda h: "CPU samples" not in h.span_from,
    ),
    CaptureRule(
        "scheduling",
        "whether a thread was running or descheduled during a gap",
        "--cpuctxsw=process-tree",
        "no thread scheduling events (SCHED_EVENTS absent or empty)",
        lambda h: "scheduling events" not in h.span_from,
    ),
    CaptureRule(
        "forked_workers",
        "what DataLoader workers did, if forked (num_workers > 0, fork start method)",
        "--trace-fork-before-exec=true",
        "PyTorch ran and only one process has traced calls or ranges",
        lambda h: "PyTorch" in h.frameworks and h.traced_processes <= 1,
    ),
    CaptureRule(
        "gpu_metrics",
        "whether kernels used tensor cores (judged by kernel names instead)",
        "--gpu-metrics-devices=all",
        "no GPU metrics (GPU_METRICS absent or empty)",
        lambda h: (
            h.counts.get("kernels", 0) > 0
            and not h.counts.get("GPU metrics samples", 0)
            and _tensor_cores_possible(h)
            and _metrics_possible(h)
        ),
    ),
    CaptureRule(
        "memory_usage",
        "how much device memory the program held over time",
        "--cuda-memory-usage=true",
        "no CUDA memory usage events (CUDA_GPU_MEMORY_USAGE_EVENTS absent)",
        lambda h: _gpu_work(h) and "CUDA_GPU_MEMORY_USAGE_EVENTS" not in h.tables,
    ),
    CaptureRule(
        "graph_trace",
        "which NVTX ranges captured the kernels of each CUDA graph replay",
        "--cuda-graph-trace=node",
        "CUDA graphs traced whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE): their kernels are not recorded",
        lambda h: h.counts.get("graph launches", 0) > 0,
    ),
    CaptureRule(
        "graph_nodes",
        "which NVTX ranges captured the kernels of each CUDA graph replay (counted in their launch's ranges)",
        "--cuda-graph-trace=node",
        "kernels ran from CUDA graph nodes, but no node's creation is recorded (CUDA_GRAPH_NODE_EVENTS absent or "
        "without originalGraphNodeId: an nsys that does not write them)",
        lambda h: h.counts.get("graph node ops", 0) > 0 and not h.counts.get("graph node ops traced to their capture"),
    ),
    CaptureRule(
        "op_ranges",
        "which PyTorch operator launched each kernel (`nsysql ops`)",
        "--pytorch=autograd-shapes-nvtx",
        "PyTorch ran but no NVTX range is an operator's (aten::...)",
        lambda h: "PyTorch" in h.frameworks and h.op_ranges == 0,
    ),
)


def rule(key: str) -> CaptureRule:
    return next(r for r in CAPTURE_RULES if r.key == key)


def untraced_gpu(cuda_calls: bool, dropped: int = 0) -> str:
    """Why a profile without any GPU op (kernel, copy or memset) says nothing of the GPU: an export without GPU
    activity does not show that the GPU was unused. `cuda_calls`: whether it holds CUDA API calls (CUDA was
    traced; its GPU activity is not in the file); `dropped`: the export's GPU activity rows the load left out
    as flawed (dropped_rows.sql): where there are some, GPU activity was recorded, and none of it is usable."""
    if dropped:
        return (
            f"the export's {dropped:,} rows of GPU activity were all left out "
            "(`nsysql info` says why, under data quality)"
        )
    if cuda_calls:
        return "the export holds CUDA API calls but no GPU activity (no kernel, copy or memset recorded)"
    return "the export holds no CUDA trace (captured without -t cuda, or the program used no GPU)"


def unusable_gpu(con) -> str:
    """Where no GPU op is left: the clause that says the export's GPU activity was recorded and the load left
    all of it out as flawed (dropped_rows.sql; as summary says it, after "no usable GPU work: "), or '' where
    none was left out (then no GPU work was traced)."""
    dropped = run(con, "dropped_rows", canonical="gpu_ops").item()
    return untraced_gpu(False, dropped) if dropped else ""


def switch(key: str) -> str:
    """`nsys profile SWITCH`: the capture that would have recorded what rule `key` finds missing."""
    return f"`nsys profile {rule(key).switch}`"


def holdings(con, facts_: dict, counts: dict, capabilities: bool = True) -> Holdings:
    """What the export holds; `capabilities`: whether to read the compute capabilities of the GPUs that ran
    kernels (advice_facts.sql), which only the gpu_metrics rule tests."""
    one = lambda k: (facts_.get(k) or [""])[0]  # noqa: E731
    traced, op_ranges = con.execute(
        "SELECT (SELECT count(DISTINCT pid) FROM (SELECT pid FROM api_calls UNION SELECT pid FROM os_calls "
        "UNION SELECT pid FROM nvtx_ranges)), (SELECT count(*) FROM nvtx_ranges WHERE name LIKE 'aten::%')"
    ).fetchall()[0]
    return Holdings(
        tables=frozenset(t for t in one("tables_in_file").split(",") if t),
        span_from=one("span_from"),
        counts=counts,
        frameworks=tuple(facts_.get("framework", [])),
        traced_processes=traced,
        op_ranges=op_ranges,
        capabilities=facts(con).capabilities if capabilities else (),
    )


def unanswered(h: Holdings) -> list[CaptureRule]:
    """The capture rules that hold for this export, in the table's order."""
    return [r for r in CAPTURE_RULES if r.holds(h)]


# the rules whose capture records what the CPU did while the GPU idled (the `meanwhile` line's blind spot)
CPU_RULES = ("cpu_samples", "scheduling", "forked_workers")


def cpu_capture_hint(con, facts_: dict, osrt: bool = False) -> str:
    """A clause for a gap explanation that found nothing traced elsewhere and no CPU evidence (cpu.story: it
    needs scheduling events): the `nsys profile` switches that would have recorded what the CPU ran meanwhile
    (the CPU_RULES that hold for this export; `osrt`: the export lacks OS runtime calls too, which nsys's
    default trace set, `-t cuda,nvtx,osrt` as `nsysql profile` traces, records). Empty when none applies."""
    # the CPU rules test no row count: table_counts.sql is not run, since it reads every canonical table (a
    # summary of a lazy build would read every GPU metric sample for it)
    h = holdings(con, facts_, {}, capabilities=False)
    missing = (["-t cuda,nvtx,osrt"] if osrt else []) + [rule(k).switch for k in CPU_RULES if rule(k).holds(h)]
    if missing:
        return f"; `nsys profile {' '.join(missing)}` would record what the CPU ran meanwhile"
    return ""
