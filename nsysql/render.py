"""Turn analysis results (a DataFrame, or a dict of named DataFrames) into table, CSV, JSON or Markdown text.

Front-end helper: no SQL, no analysis, only presentation. The same switches work for every command.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars is imported by whoever made the frames: `nsysql --help` needs none of it
    import polars as pl

FORMATS = ("table", "csv", "json", "markdown")
TABLE_TEXT_WIDTH = 72
# prose columns are never shortened in the table format; names (kernels, ranges) are
PROSE = {"value", "evidence", "detected", "outlier_pattern", "sentence", "description"}
# the table format is for reading: past this many rows it shows the first and last ones (csv/json give all)
TABLE_MAX_ROWS = 60


def render(result: pl.DataFrame | dict[str, pl.DataFrame], fmt: str, title: str | None = None) -> str:
    if not isinstance(result, dict):
        result = {title or "": result}
    if fmt == "json":
        return json.dumps(
            {k: _records(v) for k, v in result.items()} if len(result) > 1 or "" not in result
            else _records(next(iter(result.values()))),
            indent=2, default=str,
        ) + "\n"
    parts = []
    for name, df in result.items():
        if fmt == "csv":
            parts.append((f"# {name}\n" if name else "") + _flat(df).write_csv(float_precision=3))
        elif fmt == "markdown":
            parts.append((f"### {name}\n\n" if name else "") + markdown(df))
        else:
            parts.append((f"== {name} ==\n" if name else "") + table(df))
    return "\n".join(parts)


def _flat(df: pl.DataFrame) -> pl.DataFrame:
    """CSV holds no lists or structs (a user's `nsysql sql` may return them): those cells as JSON text."""
    nested = [c for c, t in df.schema.items() if t.is_nested()]
    if not nested:
        return df
    import polars as pl

    def text(v):  # a list cell arrives as a Series
        return json.dumps(v.to_list() if isinstance(v, pl.Series) else v, default=str)

    return df.with_columns(pl.col(c).map_elements(text, return_dtype=pl.String) for c in nested)


def _records(df: pl.DataFrame) -> list[dict]:
    return json.loads(df.write_json())


def _cell(v, fmt: str, width: int | None) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if fmt == "table" else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if 0 < abs(v) < 1:  # 3 significant digits: 0.0179 ms or -0.04 ms, not 0.0 and -0.0
            return f"{v:.3g}"
        return f"{v:,.1f}" if fmt == "table" else f"{v:.1f}"
    s = str(v).replace("\n", " ")
    if fmt == "markdown":
        s = s.replace("|", "\\|")
    if width and len(s) > width:
        s = s[: width - 1] + "…"
    return s


def table(df: pl.DataFrame, width: int = TABLE_TEXT_WIDTH, max_rows: int = TABLE_MAX_ROWS) -> str:
    if df.height == 0:
        return "(no rows)\n"
    hidden = df.height - max_rows if max_rows and df.height > max_rows else 0
    if hidden:
        df = df.head(max_rows - 10).vstack(df.tail(10))
    cols = df.columns
    limits = [None if c in PROSE else width for c in cols]
    cells = [[_cell(v, "table", w) for v, w in zip(row, limits)] for row in df.iter_rows()]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    numeric = [df.schema[c].is_numeric() for c in cols]

    def line(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = [line(cols), line(["-" * w for w in widths])]
    body = [line(r) for r in cells]
    if hidden:
        body.insert(max_rows - 10, f"… {hidden:,} more rows (-f csv or -f json for all {hidden + max_rows:,})")
    out += body
    return "\n".join(out) + "\n"


def markdown(df: pl.DataFrame, width: int | None = 100) -> str:
    if df.height == 0:
        return "_no rows_\n"
    cols = df.columns
    numeric = [df.schema[c].is_numeric() for c in cols]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for row in df.iter_rows():
        out.append("| " + " | ".join(_cell(v, "table" if isinstance(v, (int, float)) else "markdown", width)
                                     for v in row) + " |")
    return "\n".join(out) + "\n"
