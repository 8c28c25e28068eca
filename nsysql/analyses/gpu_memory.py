"""GPU memory held through CUDA's allocator (`nsys profile --cuda-memory-usage=true`): what the bytes held in
`gpu-memory`'s tables leave out, said under them."""

from __future__ import annotations

from ._names import said_bytes
from ._sql import run


def before_capture_note(con) -> str | None:
    """The line said under `gpu-memory`'s tables (each event, per iteration, per range) where the capture
    frees device memory it never saw allocated (gpu_memory_before_capture.sql): allocated before the capture
    began, so the bytes held, counted from the capture's start, are that much less than the process held, and
    may fall below 0. None where every free has its allocation in the capture."""
    got = run(con, "gpu_memory_before_capture").row(0, named=True)
    if not got["frees"]:
        return None
    frees = f"{got['frees']:,} free{'s' if got['frees'] != 1 else ''}"
    said = (
        f"{frees} ({said_bytes(got['bytes'])}) release device memory allocated before the capture began, which "
        "the export does not show: the bytes held count from the capture's start"
    )
    if got["below_zero_ns"] is not None:
        said += f", and fall below 0 from {got['below_zero_ns'] / 1e9:.4f} s on the export's clock"
    return said
