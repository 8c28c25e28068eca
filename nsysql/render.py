"""Turn analysis results (a DataFrame, or a dict of named DataFrames) into table, CSV, JSON or Markdown text.

Front-end helper: no SQL, no analysis, only presentation. The same switches work for every command.
"""

from __future__ import annotations

import json
import math
import os
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
PROSE_MAX = 2000

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


def distinct(names: list[str | None], limit: int, missing: str = "(no name)") -> list[str]:
    """Each name as one line of at most `limit` characters, cut with `…`; where two cut names would read the same
    (kernels that differ only past the cut: `multi_tensor_apply_kernel<...>` of several optimizers), each keeps
    its head and, after a `…`, the stretch from just before where it first differs from the others. A label that
    still repeats gets its rank among those (` #2`)."""
    cut = [one_line(n, limit) if n is not None else missing for n in names]
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(cut):
        groups.setdefault(c, []).append(i)
    for idx in groups.values():
        full = sorted({visible(names[i]) for i in idx if names[i] is not None})
        if len(full) < 2:  # one name (and missing ones, all `missing`): the ranks below tell their rows apart
            continue
        # the longest prefix a name shares with any other is the one it shares with a neighbour in sorted order:
        # a group of thousands (kernels named with a counter past the cut) is sorted once, not compared in pairs
        shared = {
            n: max(len(os.path.commonprefix([n, o])) for o in full[max(k - 1, 0) : k + 2] if o != n)
            for k, n in enumerate(full)
        }
        for i in idx:
            if names[i] is not None:
                cut[i] = _distinguished(visible(names[i]), shared[visible(names[i])], limit)
    seen: dict[str, int] = {}
    for i, c in enumerate(cut):
        seen[c] = seen.get(c, 0) + 1
        if seen[c] > 1:
            cut[i] = c[: limit - 4 - len(str(seen[c]))] + f"… #{seen[c]}"
    return cut


def _distinguished(name: str, differs: int, limit: int) -> str:
    """`name` cut to `limit`: its first third, `…`, then the part around where it first differs from the others
    (`differs`: the longest prefix it shares with any of them)."""
    head = limit // 3
    room = limit - head - 2  # room for the stretch, between the `…` after the head and one at its end
    start = max(head, min(differs - room // 4, len(name) - room - 1))
    if start <= head:
        return one_line(name, limit)
    stretch = name[start : start + room]
    return name[:head] + "…" + stretch + ("…" if start + room < len(name) else "")


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


def render(
    result: pl.DataFrame | dict[str, pl.DataFrame],
    fmt: str,
    title: str | None = None,
    width: int | None = None,
    unit: str | None = None,
    what: str | None = None,
    wide: bool = False,
) -> str:
    """`result` in `fmt`. Table format: times (`*_ns` columns) in the unit that reads best for the table
    (best_unit; `unit`: the one given), fitted to `width` characters when given (see fit). CSV, JSON and Markdown keep nanoseconds unless
    `unit` is given. `what`: what an untitled answer lists, for the sentence an empty one prints. `wide`: every
    column, names whole (up to PROSE_MAX)."""
    if not isinstance(result, dict):
        result = {title or "": result}
    result = {k: printable(v) for k, v in result.items()}
    if unit is not None or fmt == "table":
        result = {k: in_units(v, unit) for k, v in result.items()}
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
            # 3 decimals of a ns figure (an average), and as many more as the unit's factor has digits
            digits = 3 + len(str(UNITS[unit])) - 1 if unit else 3
            parts.append((f"# {name}\n" if name else "") + _flat(df).write_csv(float_precision=digits))
        elif fmt == "markdown":
            parts.append((f"### {visible(name)}\n\n" if name else "") + markdown(df))
        else:
            parts.append(
                (f"== {visible(name)} ==\n" if name else "")
                + table(
                    df,
                    width=None if wide else width,
                    what=name or what,
                    name_width=PROSE_MAX if wide else TABLE_TEXT_WIDTH,
                )
            )
    return "\n".join(parts)


def summary_view(s: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """A summary's frames as people read them: facts by label (their stable `key` is for programs); the line
    under the kernel table (fact `kernels_note`) is not a fact here: summary_text writes it under that table. The
    `memory` section (copies and memsets) is titled `memory operations`, as the report titles it: its empty line
    said "no memory", of profiles whose GPU memory nsys traced (`nsysql gpu-memory`)."""
    import polars as pl

    s = {**s, "facts": s["facts"].filter(pl.col("key") != "kernels_note").select("item", "value")}
    return {("memory operations" if k == "memory" else k): v for k, v in s.items()}


def summary_text(s: dict[str, pl.DataFrame], fmt: str, fit=lambda text: text, **look) -> str:
    """A summary as render writes summary_view(s), and in a table or Markdown the line under its kernels section
    (fact `kernels_note`: what that table leaves out) as `nsysql kernels` writes it under its own (`fit`: the
    note's lines wrapped as the front end wraps prose). CSV and JSON keep it among the facts."""
    import polars as pl

    notes = s["facts"].filter(pl.col("key") == "kernels_note")["value"].to_list()
    if fmt in ("csv", "json"):
        return render({**s, "facts": s["facts"].select("item", "value")}, fmt, **look)
    if not notes or "kernels" not in s:
        return render(summary_view(s), fmt, **look)
    shown = summary_view(s)
    names = list(shown)
    cut = names.index("kernels") + 1
    head = render({k: shown[k] for k in names[:cut]}, fmt, **look)
    tail = render({k: shown[k] for k in names[cut:]}, fmt, **look) if names[cut:] else ""
    note = fit(f"\n{notes[0]}\n") if fmt == "table" else f"\n{notes[0]}\n"
    return head + note + ("\n" + tail if tail else "")


UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
# decimals of each unit in the table format: what a nanosecond count can still tell (1 ns is 0.001 us, ...), cut
# at what one reads (a step of 4.08 ms needs no 4.076631)
_DECIMALS = {"ns": 0, "us": 1, "ms": 2, "s": 4}


def time_columns(df: pl.DataFrame) -> list[str]:
    """The columns that hold a time in ns: numeric, named `*_ns` (a duration, or a timestamp: start_ns)."""
    return [c for c, t in df.schema.items() if c.endswith("_ns") and t.is_numeric()]


def best_unit(df: pl.DataFrame, cols: list[str]) -> str:
    """The unit in which the columns' typical value (the median of each column's median non-zero magnitude)
    reads between 1 and 1000: kernels' 120,401 ns as 120.4 us, a step's 4,076,631 ns as 4.08 ms."""
    import polars as pl

    if not cols:
        return "ns"
    magnitude = [pl.col(c).cast(pl.Float64).abs() for c in cols]
    typical = df.select([m.filter(m > 0).median().alias(str(i)) for i, m in enumerate(magnitude)]).row(0)
    typical = [t for t in typical if t is not None]
    if not typical:
        return "ns"
    mid = sorted(typical)[len(typical) // 2]
    return next((u for u in ("s", "ms", "us") if mid >= UNITS[u]), "ns")


def _timestamp(column: str) -> bool:
    """A time of day on the export's clock (`start_ns`, `gpu_end_ns`), not a duration: it gets a unit of its own."""
    return column in ("start_ns", "end_ns", "ts_ns") or column.endswith(("_start_ns", "_end_ns"))


def in_units(df: pl.DataFrame, unit: str | None) -> pl.DataFrame:
    """`df` with each time column (`x_ns`) in `unit` (`x_ms`, ...), or in its best_unit where `unit` is None,
    in place, the quotient as a float (the table format shows it with the unit's _DECIMALS). A column whose new
    name the answer has already keeps its nanoseconds."""
    import polars as pl

    if unit is not None and unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
    cols = set(time_columns(df))
    if not cols:
        return df
    stamps = [c for c in df.columns if c in cols and _timestamp(c)]
    spans = [c for c in df.columns if c in cols and not _timestamp(c)]
    # one unit for the timestamps and one for the spans, each from all of its columns
    stamp_unit = (unit or best_unit(df, stamps)) if stamps else None
    span_unit = (unit or best_unit(df, spans)) if spans else None
    units = {c: stamp_unit for c in stamps} | {c: span_unit for c in spans}
    taken = set(df.columns)
    exprs = []
    for c in df.columns:
        u = units.get(c, "ns")
        name = c[: -len("ns")] + u
        if u == "ns" or name in taken:
            exprs.append(pl.col(c))
            continue
        exprs.append((pl.col(c).cast(pl.Float64) / UNITS[u]).alias(name))
    return df.select(exprs)


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


def _cell(v, fmt: str, width: int | None, decimals: int | None = None) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if fmt == "table" else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if decimals is not None and fmt == "table":  # a time in a unit: the unit's decimals, aligned
            # unless they would show a time as 0: then 2 significant digits (0.0028 ms)
            return f"{v:.2g}" if 0 < abs(v) < 0.5 / 10**decimals else f"{v:,.{decimals}f}"
        if 0 < abs(v) < 1:  # 3 significant digits: 0.0179 ms or -0.04 ms, not 0.0 and -0.0
            return f"{v:.3g}"
        if fmt == "table" and v.is_integer() and abs(v) < 2**53:  # a count held as a float: 39, not 39.0
            return f"{int(v):,}"
        return f"{v:,.1f}" if fmt == "table" else f"{v:.1f}"
    if fmt == "markdown":  # text is data (a kernel's, a range's name): a code span, never live Markdown
        return code(str(v).replace("\n", " "), width, table=True)
    s = visible(str(v).replace("\n", " "))
    if fmt == "markdown head":
        s = s.replace("|", "\\|")
    if width and len(s) > width:
        s = s[: width - 1] + "…"
    return s


def _decimals(column: str) -> int | None:
    """The decimals of a time column (in_units' names: `total_ms`) that holds floats, None for any other column
    (an average of ns keeps one: 782.4, and 768.0 beside it)."""
    if column.endswith("_ns"):
        return 1
    return next((d for u, d in _DECIMALS.items() if u != "ns" and column.endswith("_" + u)), None)


def empty(what: str | None) -> str:
    """The sentence an answer without rows prints: `no findings`, `no gaps`."""
    return f"no {visible(what)}\n" if what else "no rows: nothing to list\n"


def table(
    df: pl.DataFrame,
    width: int | None = None,
    max_rows: int = TABLE_MAX_ROWS,
    what: str | None = None,
    name_width: int = TABLE_TEXT_WIDTH,
) -> str:
    """`df` as an aligned text table. `width`: the terminal's, which the table then fits (fit): names shortened,
    prose wrapped, and the right-most columns left out with a line that names them. None: every column, names
    cut at `name_width`."""
    import polars as pl

    if df.height == 0:
        return empty(what)
    hidden = df.height - max_rows if max_rows and df.height > max_rows else 0
    if hidden:
        df = df.head(max_rows - 10).vstack(df.tail(10))
    cols = df.columns
    limits = [PROSE_MAX if c in PROSE else name_width for c in cols]
    decimals = [_decimals(c) for c in cols]
    cells = [[_cell(v, "table", w, d) for v, w, d in zip(row, limits, decimals)] for row in df.iter_rows()]
    heads = [_cell(c, "table", name_width) for c in cols]  # a user's `nsysql sql` names its columns
    schema = df.schema  # built anew at each `df.schema`: once, not once a column
    numeric = [schema[c].is_numeric() for c in cols]
    kinds = ["number" if n else "prose" if c in PROSE else "name" for c, n in zip(cols, numeric)]
    keep, widths, note = fit(heads, cells, kinds, width)
    for i in keep:  # names that would read the same once cut to the column's width are told apart
        if kinds[i] == "name" and _named(cols[i]) and schema[cols[i]] == pl.String:
            labels = _apart(df.get_column(cols[i]).to_list(), widths[i])
            for row, label in zip(cells, labels or []):
                if label is not None:
                    row[i] = label
    out = [_line([heads[i] for i in keep], widths, numeric, keep)]
    out.append(_line(["-" * widths[i] for i in keep], widths, numeric, keep))
    body = [line for r in cells for line in _row_lines(r, keep, widths, numeric, kinds)]
    if hidden:
        at = sum(len(_row_lines(r, keep, widths, numeric, kinds)) for r in cells[: max_rows - 10])
        body.insert(at, f"… {hidden:,} more rows (-f csv or -f json for all {hidden + max_rows:,})")
    out += body
    if note:
        out.append(note)
    return "\n".join(out) + "\n"


MIN_NAME = 24  # a name column is not shortened below this (nor below its header)
MIN_FIRST = 40  # the first column (what each row is about) not below this
MIN_PROSE = 40  # nor is prose wrapped narrower


def fit(heads, cells, kinds, width):
    """Which columns to show and how wide, for a table of at most `width` characters per line (None: all, as
    wide as their cells). First prose is wrapped and names shortened, the widest first, down to MIN_PROSE and
    MIN_NAME; then columns are left out from the right (the first always stays, prose last), each time with the
    others back at their whole width. Returns the shown columns' indices, every column's width, and the line that
    names what was left out (None)."""
    natural = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(heads)]
    widths = list(natural)
    keep = list(range(len(heads)))
    if width is None:
        return keep, widths, None

    least = {"number": 0, "prose": MIN_PROSE, "name": MIN_NAME}
    floor = [
        natural[i] if k == "number" else min(natural[i], max(len(h), MIN_FIRST if i == 0 else least[k]))
        for i, (h, k) in enumerate(zip(heads, kinds))
    ]
    # a column is left out only once every kept one is at its floor, so the kept ones are the first that fit at
    # their floors when left out in this order (the right-most other than prose first, then prose, the first
    # never), counted with one running sum: linear in the columns, however many a user's query returns
    order = [i for i in reversed(keep[1:]) if kinds[i] != "prose"] + [
        i for i in reversed(keep[1:]) if kinds[i] == "prose"
    ]
    gone: set[int] = set()
    least_total = sum(floor) + 2 * (len(keep) - 1)
    for i in order:
        if least_total <= width:
            break
        gone.add(i)
        least_total -= floor[i] + 2
    keep = [i for i in keep if i not in gone]

    def total():
        return sum(widths[i] for i in keep) + 2 * (len(keep) - 1)

    # then the kept ones shrink from their whole width, the widest first
    while total() > width:
        shrink = [i for i in keep if widths[i] > floor[i]]
        if not shrink:
            break
        i = max(shrink, key=lambda j: widths[j] - floor[j])
        widths[i] -= min(total() - width, widths[i] - floor[i], max(1, (widths[i] - floor[i]) // 2))
    left = [heads[i] for i in sorted(gone)]
    if not left:
        return keep, widths, None
    more = f"{len(left)} more column{'s' if len(left) > 1 else ''}"
    note = f"(--wide shows {more}, -f csv every value: {', '.join(left)})"
    return keep, widths, one_line(note, max(width, 40))


def _named(column: str) -> bool:
    """Whether a column holds names (a kernel's, a range's, a call's), each row its own: rows that read the same
    there read as one thing twice. A text column that describes (`needs`, `why`) may repeat its cut head."""
    return column in ("name", "kernel", "range", "op") or column.endswith("_name")


def _apart(names: list[str | None], width: int) -> list[str | None] | None:
    """Labels of `names` within `width`, where two that differ would read the same once cut (kernels that differ
    only in a template argument past the cut): distinct()'s for each name (None for a missing one). None where
    the cut tells every name apart already."""
    cut: dict[str, set[str]] = {}
    for n in names:
        if n is not None:
            flat = visible(n.replace("\n", " "))
            cut.setdefault(flat if len(flat) <= width else flat[: width - 1] + "…", set()).add(n)
    if all(len(behind) < 2 for behind in cut.values()):
        return None
    flat = [None if n is None else n.replace("\n", " ") for n in names]
    return [None if n is None else label for n, label in zip(names, distinct(flat, width, ""))]


def _row_lines(row, keep, widths, numeric, kinds) -> list[str]:
    """One table row as lines: prose wrapped at its column's width, a name cut with `…`."""
    import textwrap

    parts = []
    for i in keep:
        v, w = row[i], widths[i]
        if kinds[i] == "prose" and len(v) > w:
            parts.append(textwrap.wrap(v, w, break_long_words=True, break_on_hyphens=False) or [""])
        elif len(v) > w:
            parts.append([v[: w - 1] + "…"])
        else:
            parts.append([v])
    height = max(len(p) for p in parts)
    return [_line([p[n] if n < len(p) else "" for p in parts], widths, numeric, keep) for n in range(height)]


def _line(vals, widths, numeric, keep) -> str:
    return "  ".join(v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for v, i in zip(vals, keep)).rstrip()


def markdown(df: pl.DataFrame, width: int | None = 100) -> str:
    import polars as pl

    if df.height == 0:
        return "_no rows_\n"
    cols = df.columns
    schema = df.schema  # built anew at each `df.schema`: once, not once a column
    numeric = [schema[c].is_numeric() for c in cols]
    out = [
        "| " + " | ".join(_cell(c, "markdown head", width) for c in cols) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    # prose (a straggler's sentence, a finding's evidence) whole, as the table format keeps it; names cut at `width`
    limits = [PROSE_MAX if c in PROSE else width for c in cols]
    # names that would read the same once cut are told apart (a label is cut already: code() cuts no further)
    told = {
        j: labels
        for j, c in enumerate(cols)
        if width and _named(c) and schema[c] == pl.String
        if (labels := _apart(df.get_column(c).to_list(), width)) is not None
    }
    for r, row in enumerate(df.iter_rows()):
        out.append(
            "| "
            + " | ".join(
                code(told[j][r], None, table=True)
                if j in told and told[j][r] is not None
                else _cell(v, "table" if isinstance(v, (int, float)) else "markdown", lim)
                for j, (v, lim) in enumerate(zip(row, limits))
            )
            + " |"
        )
    return "\n".join(out) + "\n"
