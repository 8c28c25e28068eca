"""Charts drawn as SVG by nsysql itself: the fallback when plotly's image export (kaleido and a Chrome) is not
there. An SVG opens in any browser and shows inline in a Markdown page on GitHub."""

from __future__ import annotations

from html import escape

import polars as pl

from ..render import distinct
from .markdown import top_kernels


def kernels_svg(k: pl.DataFrame, width: int = 1000) -> str:
    """Horizontal bars of the kernels frame `k` (name, total_ns, count, pct; in its order, largest first):
    one bar per kernel, its total ms and % of kernel time written beside it."""
    rows = k.select("name", "total_ns", "count", "pct").rows()
    left, right, top, bar, gap = 420, 110, 46, 22, 8
    height = top + len(rows) * (bar + gap) + 30
    most = max((r[1] for r in rows), default=0) or 1
    span = width - left - right
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="24" font-size="16">{top_kernels(len(rows))} by total GPU time</text>',
    ]
    labels = distinct([r[0] for r in rows], 48)  # unique where cut names would read the same
    for i, (name, total, count, pct) in enumerate(rows):
        y = top + i * (bar + gap)
        w = max(1.0, span * total / most)
        label = escape(f"{i + 1}. {labels[i]}")
        out.append(
            f'<text x="{left - 8}" y="{y + bar * 0.7:.1f}" text-anchor="end" font-family="monospace" font-size="11">{label}</text>'
        )
        out.append(
            f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar}" fill="#4C78A8">'
            f"<title>{escape(name or '')}: {total / 1e6:.3f} ms in {count} launches</title></rect>"
        )
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar * 0.7:.1f}">{total / 1e6:,.2f} ms ({pct:.1f}%)</text>')
    out.append(f'<text x="{left}" y="{height - 10}" fill="#555">total GPU time per kernel name, ms</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
