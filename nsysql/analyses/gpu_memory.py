"""GPU memory held through CUDA's allocator (`nsys profile --cuda-memory-usage=true`): what the bytes held in
`gpu-memory`'s tables leave out, said under them."""

from __future__ import annotations

from ._names import said_bytes
from ._sql import run


def before_capture_note(con) -> str | None:
    """The line said under `gpu-memory`'s tables (each event, per iteration, per range) where the capture
    frees device memory whose allocation the export does not hold (gpu_memory_before_capture.sql): made before
    the capture began (nsys 2025.3 lists those still live at time 0; an export may lack them), or not recorded.
    The bytes held, counted from the export's first event, are then that much less than the process held, and
    may fall below 0. None where every free has its allocation in the export."""
    got = run(con, "gpu_memory_before_capture").row(0, named=True)
    if not got["frees"]:
        return None
    frees = f"{got['frees']:,} free{'s' if got['frees'] != 1 else ''}"
    said = (
        f"{frees} ({said_bytes(got['bytes'])}) release device memory whose allocation the export does not hold "
        "(made before the capture began, or not recorded): the bytes held leave it out"
    )
    if got["below_zero_ns"] is not None:
        said += f", and fall below 0 from {got['below_zero_ns'] / 1e9:.4f} s on the export's clock"
    return said
