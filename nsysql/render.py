"""Turn analysis results (a DataFrame, or a dict of named DataFrames) into table, CSV, JSON or Markdown text.

Front-end helper: no SQL, no analysis, only presentation. The same switches work for every command.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars is imported by whoever made the frames: `nsysql --help` needs none of it
    import polars as pl

FORMATS = ("table", "csv", "json", "markdown")
TABLE_TEXT_WIDTH = 72
# prose columns are never shortened in the table format; names (kernels, ranges) are
PROSE = {"value", "evidence", "detected", "outlier_pattern", "sentence", "description"}
# the table format is for reading: past this many rows it shows the first and last ones (csv/json give all)
TABLE_MAX_ROWS = 60
# prose is not cut at the column width, but a sentence may quote a name (a range family in a finding), and an
# export's names may be megabytes long: past this it is cut too (csv/json give it whole)
PROSE_MAX = 1000

# Characters a terminal acts on instead of showing: C0 and C1 controls (an ESC starts a sequence that can retitle
# the window or rewrite the screen; CR returns to the line's start and hides what was before), DEL, and the
# Unicode marks that reorder the text around them. Table and Markdown output show them as escapes (`\x1b`,
# `\r`); CSV and JSON keep them, quoted as those formats quote.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """`text` with every control character written as an escape, so that printing it moves no cursor, changes no
    title and hides nothing: a name holding ESC ] 0 ; x BEL prints as the characters `\\x1b]0;x\\x07`."""
    return _CONTROL.sub(_escape, text)


def one_line(text: str, limit: int = PROSE_MAX) -> str:
    """`text` for one line of a terminal: control characters (newlines too) as escapes, at most `limit` long."""
    text = visible(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(text: str, limit: int | None = None, table: bool = False) -> str:
    """`text` as one Markdown code span, shown as it is: nothing in it is read as Markdown or HTML (an image, a
    link, a tag, `<unnamed>`, an autolinked URL), whatever an export named. Control characters are escapes and
    the text is cut at `limit` first (a span cut later would leave its opening backticks open). The fence is one
    backtick longer than the longest run of backticks inside, padded with a space on each side where the text
    begins or ends with a backtick, or begins and ends with a space (CommonMark strips one space from each end of
    such a span, unless it is all spaces); `table`: `|` escaped as `\\|`, which
    GitHub's tables read as part of the cell, inside a code span too. Empty text stays empty."""
    text = visible(text)
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    if not text:
        return ""
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if "`" in (text[0], text[-1]) or (text[0] == text[-1] == " " and text.strip(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _escape(m: re.Match) -> str:
    c = m.group()
    return _ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def render(result: pl.DataFrame | dict[str, pl.DataFrame], fmt: str, title: str | None = None) -> str:
    if not isinstance(result, dict):
        result = {title or "": result}
    result = {k: printable(v) for k, v in result.items()}
    if fmt == "json":
        return (
            json.dumps(
                {k: _records(v) for k, v in result.items()}
                if len(result) > 1 or "" not in result
                else _records(next(iter(result.values()))),
                indent=2,
                default=str,
            )
            + "\n"
        )
    parts = []
    for name, df in result.items():
        if fmt == "csv":
            parts.append((f"# {name}\n" if name else "") + _flat(df).write_csv(float_precision=3))
        elif fmt == "markdown":
            parts.append((f"### {visible(name)}\n\n" if name else "") + markdown(df))
        else:
            parts.append((f"== {visible(name)} ==\n" if name else "") + table(df))
    return "\n".join(parts)


def summary_view(s: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """A summary's frames as people read them: facts by label (their stable `key` is for programs)."""
    return {**s, "facts": s["facts"].select("item", "value")}


def printable(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the columns no text format can write as polars holds them turned into text (a user's `nsysql
    sql` may return any DuckDB type): BLOBs as DuckDB writes them (`ab\\x00`), MAPs, and dates and timestamps
    out of polars' range (DuckDB's `infinity` and `-infinity`), which polars cannot format at all. Columns of
    other types are left as they are."""
    import polars as pl

    fix = {c: _text(df[c]) for c, t in df.schema.items() if _needs_text(df[c], t)}
    return df.with_columns(pl.Series(c, v, dtype=pl.String) for c, v in fix.items()) if fix else df


_DAY_US = 86_400_000_000
_UNIT_US = {"ns": 1e-3, "us": 1, "ms": 1_000}
_SAFE_DAYS = 2_932_896  # 9999-12-31: a date Python (and so every format here) can write


def _needs_text(s: pl.Series, t) -> bool:
    import polars as pl

    if _contains(t, (pl.Binary, pl.Map)) or (t.is_nested() and _contains(t, (pl.Date, pl.Datetime))):
        return True
    if t == pl.Date or isinstance(t, pl.Datetime):
        phys = s.to_physical()
        days = phys.cast(pl.Float64) / (1 if t == pl.Date else _DAY_US / _UNIT_US[t.time_unit])
        infinite = phys.abs() == (2**31 - 1 if t == pl.Date else 2**63 - 1)  # within range for TIMESTAMP_NS
        return bool((((days.abs() > _SAFE_DAYS) & days.is_not_null()) | infinite).any())
    return False


def _contains(t, kinds) -> bool:
    import polars as pl

    if isinstance(t, kinds):
        return True
    if isinstance(t, pl.Struct):
        return any(_contains(f.dtype, kinds) for f in t.fields)
    if isinstance(t, (pl.List, pl.Array)):
        return _contains(t.inner, kinds)
    return False


def _text(s: pl.Series) -> list[str | None]:
    """Each value of `s` as text, built from its physical values (no polars formatting, which panics on dates
    beyond its range): scalars as plain text, nested values as JSON."""
    t = s.dtype
    return [
        None if v is None else (_plain(v, t) if not t.is_nested() else json.dumps(_value(v, t), default=str))
        for v in s.to_physical().to_list()
    ]


def _value(v, t):
    import polars as pl

    if v is None:
        return None
    if isinstance(t, pl.Map):
        return {str(_value(e["key"], t.key)): _value(e["value"], t.value) for e in v}
    if isinstance(t, pl.Struct):
        return {f.name: _value(v.get(f.name), f.dtype) for f in t.fields}
    if isinstance(t, (pl.List, pl.Array)):
        return [_value(x, t.inner) for x in v]
    if t == pl.Date or isinstance(t, pl.Datetime) or t == pl.Binary:
        return _plain(v, t)
    return v


def _plain(v, t) -> str:
    import datetime as dt

    import polars as pl

    if t == pl.Binary:  # DuckDB's spelling of a BLOB: printable ASCII as it is, other bytes as \xNN
        return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in v)
    if t == pl.Date or isinstance(t, pl.Datetime):
        if v in (2**31 - 1, 2**63 - 1):  # DuckDB's infinite DATE and TIMESTAMP
            return "infinity"
        if v in (-(2**31) + 1, -(2**63) + 1):
            return "-infinity"
        try:
            if t == pl.Date:
                return (dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat()
            return str(dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=v * _UNIT_US[t.time_unit]))
        except (OverflowError, ValueError):
            return f"{v} {'days' if t == pl.Date else t.time_unit} since 1970-01-01"
    return str(v)


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
    if fmt == "markdown":  # text is data (a kernel's, a range's name): a code span, never live Markdown
        return code(str(v).replace("\n", " "), width, table=True)
    s = visible(str(v).replace("\n", " "))
    if fmt == "markdown head":
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
    limits = [PROSE_MAX if c in PROSE else width for c in cols]
    cells = [[_cell(v, "table", w) for v, w in zip(row, limits)] for row in df.iter_rows()]
    heads = [_cell(c, "table", width) for c in cols]  # a user's `nsysql sql` names its columns
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(heads)]
    numeric = [df.schema[c].is_numeric() for c in cols]

    def line(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = [line(heads), line(["-" * w for w in widths])]
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
    out = [
        "| " + " | ".join(_cell(c, "markdown head", width) for c in cols) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    for row in df.iter_rows():
        out.append(
            "| "
            + " | ".join(_cell(v, "table" if isinstance(v, (int, float)) else "markdown", width) for v in row)
            + " |"
        )
    return "\n".join(out) + "\n"
