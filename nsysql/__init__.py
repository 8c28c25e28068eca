"""nsysql: answers about Nsight Systems SQLite exports, as polars DataFrames.

    import nsysql
    p = nsysql.load("run.sqlite")
    p.kernels()                 # top kernels, as `nsys stats -r cuda_gpu_kern_sum`
    p.kernels_by_range("Batch") # kernels per NVTX range
"""

__version__ = "0.1.0"

from .errors import NsysqlError  # noqa: E402
from .profile import Profile, load  # noqa: E402

__all__ = ["load", "Profile", "NsysqlError", "__version__"]
