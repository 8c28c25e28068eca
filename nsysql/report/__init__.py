"""Reports: a self-contained HTML page (plotly) and PR-ready Markdown, each drawn from one declared answer of the
Profile (`report`, `snippet`, `report_diff`, `diff`: nsysql.analyses.report). Front end: draws, decides nothing
about what to compute (no SQL, no analysis here).
"""

from __future__ import annotations

from .html import build, build_diff, write_pngs
from .markdown import diff_snippet, snippet

__all__ = ["build", "build_diff", "write_pngs", "snippet", "diff_snippet"]
