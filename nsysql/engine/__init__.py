"""The engine layer: declared analyses (declare.py) and the engine that plans, serves and runs them (core.py).

Below it: the loader (canonical tables) and the answers store. Above it: the analyses, which declare themselves
here (nsysql.analyses.catalog), and the front ends (nsysql.profile, the CLI), which only ask `Engine.run`.
"""

from .core import Context, Engine, reading, reads
from .declare import ENTRY_POINTS, REGISTRY, REQUIRED, SAME, Analysis, Flag, Only, Param, analysis, entry_point, plan

__all__ = [
    "ENTRY_POINTS",
    "REGISTRY",
    "REQUIRED",
    "SAME",
    "Analysis",
    "Context",
    "Engine",
    "Flag",
    "Only",
    "Param",
    "analysis",
    "entry_point",
    "plan",
    "reading",
    "reads",
]
