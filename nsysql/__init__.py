"""nsysql: answers about Nsight Systems SQLite exports, as polars DataFrames.

    import nsysql
    p = nsysql.load("run.sqlite")
    p.kernels()                 # top kernels, as `nsys stats -r cuda_gpu_kern_sum`
    p.kernels_by_range("Batch") # kernels per NVTX range
"""

__version__ = "0.1.0"

from .errors import NsysqlError  # noqa: E402
from .many import Ranks, load_many  # noqa: E402
from .profile import Profile, load  # noqa: E402

__all__ = ["load", "load_many", "Profile", "Ranks", "NsysqlError", "__version__"]
