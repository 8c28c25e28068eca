"""nsysql: answers about Nsight Systems SQLite exports, as polars DataFrames.

import nsysql
p = nsysql.load("run.sqlite")
p.kernels()                 # top kernels, as `nsys stats -r cuda_gpu_kern_sum`
p.kernels_by_range("Batch") # kernels per NVTX range
nsysql.collectives(["rank0.sqlite", "rank1.sqlite"])  # NCCL collectives across ranks
"""

__version__ = "0.11.0"

from .errors import NsysqlError  # noqa: E402

__all__ = ["load", "load_many", "collectives", "Profile", "Ranks", "NsysqlError", "__version__"]


def __getattr__(name):  # imported on first use: `import nsysql` stays cheap for the CLI
    if name == "load":
        from ._load import load

        return load
    if name == "Profile":
        from .profile import Profile

        return Profile
    if name in ("load_many", "Ranks", "collectives"):
        from . import many

        return getattr(many, name)
    raise AttributeError(f"module 'nsysql' has no attribute {name!r}")
