"""Reports: a self-contained HTML page (plotly) and PR-ready Markdown, from a Profile's analyses.

Front end: builds on Profile methods only (no SQL here).
"""

from __future__ import annotations

from .html import build, build_diff, write_pngs
from .markdown import diff_snippet, snippet

__all__ = ["build", "build_diff", "write_pngs", "snippet", "diff_snippet"]
