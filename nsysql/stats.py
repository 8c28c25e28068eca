"""Several reports of one profile at once, as `nsys stats -r a,b,c` gives them: one load, one process, the
reports computed in parallel (Profile.parallel), a report that does not apply given as its error."""

from __future__ import annotations

from .errors import NsysqlError

REPORTS = ("kernels", "api", "ranges", "kernels-by-range", "iterations", "gaps", "gaps-by-cause")


def check(names: list[str]) -> None:
    """NsysqlError naming the first of `names` that is no report."""
    unknown = [r for r in names if r not in REPORTS]
    if unknown:
        raise NsysqlError(f"unknown report {unknown[0]!r}; choose from {', '.join(REPORTS)}")


def _ask(name: str, attribution: str):
    calls = {
        "kernels": lambda p: p.kernels(),
        "api": lambda p: p.api(),
        "ranges": lambda p: p.ranges(attribution=attribution),
        "kernels-by-range": lambda p: p.kernels_by_range(attribution=attribution),
        "iterations": lambda p: p.iterations(),
        "gaps": lambda p: p.gaps(),
        "gaps-by-cause": lambda p: p.gaps(by="cause"),
    }

    def call(p):
        try:
            return calls[name](p)
        except NsysqlError as e:
            return e

    return call


def stats(prof, names: list[str], attribution: str = "process") -> list[tuple]:
    """(report name, its frame or the NsysqlError saying why it does not apply), in the order of `names`.
    The reports run at once, each on its own cursor (iterations and gaps share one computation of iterations)."""
    check(names)
    return list(zip(names, prof.parallel(*(_ask(n, attribution) for n in names))))
