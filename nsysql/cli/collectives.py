"""`nsysql collectives`: NCCL collectives measured from their NVTX payloads, per group, across ranks."""

from __future__ import annotations

import click

from ..render import render
from .common import handled, load_profile, ranked, several
from .declared import declared
from .options import files_options
from .output import emit, emit_text, fitted


@click.command()
@files_options
@declared("collectives", "collective_findings")
@handled
def collectives(files, fmt, output, by, range, slow_ratio):
    """NCCL collectives from their NVTX payloads: calls, bytes, GPU time, bus bandwidth (median, p10, p90).

    Sizes and bandwidth need an export with payload bytes: `nsys export --type sqlite --include-blobs=true`;
    without them, per kind, the calls and GPU time of the NCCL kernels by their names, and a line saying why. With
    several FILEs (one per rank), a rank column, and who arrived last at each collective and how long the others
    waited; without payloads, each rank's kinds by kernel name, and each rank's line saying why."""
    if several(files):
        _many(files, fmt, output, by, range)
        return
    if by == "rank":
        raise click.UsageError("--by rank needs several FILEs, one per rank")
    asked = {"by": by, "range": range, "slow_ratio": slow_ratio}
    got = load_profile(files[0] if files else None, question=("collectives_shown", asked)).collectives_shown(**asked)
    df = got["collectives"]
    # without message sizes (no NVTX payloads): the kinds by kernel name, and the note saying why, not findings
    said = {"note": got["note"]} if "note" in got else {"findings": got["findings"]}
    if fmt == "json" or (fmt == "markdown" and "note" not in said):
        emit({"collectives": df, **said}, fmt, output)
    elif fmt == "csv":
        emit(df, fmt, output)
    elif "note" in said:  # the line under the table, whole (a table's cell would cut it)
        note = said["note"]["note"][0]
        emit_text(render(df, fmt) + "\n" + (fitted(f"{note}\n", output) if fmt == "table" else f"{note}\n"), output)
    else:
        emit_text(render(df, "table") + "\n" + _finding_lines(said["findings"]), output)


def _finding_lines(found) -> str:
    row = found.row(0, named=True)
    said = row["evidence"] or ("none among the calls with a GPU time" if row.get("unjudged") else "none")
    also = f"; {row['unjudged']}" if row.get("unjudged") else ""
    return f"slow collectives: {said}{also}\nrule: {row['rule']}\n"


def _many(files, fmt, output, by, range_):
    from ..many import collectives as across

    profs, ranks = ranked(files)
    if _unsized_each(profs, ranks, fmt, output, by, range_):
        return
    out = across(profs, ranks, by, range_)
    if fmt in ("json", "markdown"):
        emit({"collectives": out["collectives"], "skew": out["skew"]}, fmt, output)
    elif fmt == "csv":
        emit(out["collectives"], fmt, output)
    else:
        emit_text(render(out["collectives"], "table") + "\n" + _skew_line(out["skew"], out["skew_by_rank"]), output)


def _unsized_each(profs, ranks, fmt, output, by, range_) -> bool:
    """Where the exports' NCCL calls carry no message size (no NVTX payloads), as one file answers them: per
    rank, the calls and GPU time per kind from the NCCL kernels' names, stacked with a `rank` column, and each
    rank's line saying why there is no size (a `note` frame in JSON and Markdown). Where some exports have sizes
    and others not, one line naming those without and why (the answers would not compare). False, having
    printed nothing, where every export has sizes."""
    import polars as pl

    from ..errors import NsysqlError
    from ..many import shown_each

    asked = {"by": by if by in ("size", "kind") else "kind", "range": range_}
    got = sorted(shown_each(profs, ranks, "collectives_shown", asked, table="collectives"), key=lambda rg: rg[0])
    names = {r: p.path.name for p, r in zip(profs, ranks)}
    paths = {r: str(p.path) for p, r in zip(profs, ranks)}  # a refusal names each file whole (names may repeat)
    notes = [(r, g["note"]["note"][0]) for r, g in got if "note" in g]
    if not notes:
        return False
    if by not in ("size", "kind"):  # calls matched across ranks need each call's size: none to match here
        raise NsysqlError(
            f"`--by {by}` needs NCCL's NVTX payloads (each call's size and communicator), which "
            + ", ".join(f"rank {r} ({paths[r]})" for r, _ in notes)
            + f" lack{'s' if len(notes) == 1 else ''}: {_why(notes[0][1])}; `--by kind` gives each rank's calls "
            "and GPU time per kind from the NCCL kernels' names",
            option="by",
        )
    if len(notes) < len(got):
        raise NsysqlError(
            "message sizes are in "
            + ", ".join(f"rank {r} ({paths[r]})" for r, g in got if "note" not in g)
            + " but not in "
            + ", ".join(f"rank {r} ({paths[r]})" for r, _ in notes)
            + f" ({_why(notes[0][1])}): the answers would not compare; give exports that all have NCCL's NVTX "
            "payloads, or each file alone"
        )
    table = pl.concat([g["collectives"] for _, g in got], how="diagonal_relaxed")
    table = table.select("rank", *[c for c in table.columns if c != "rank"])
    said = pl.DataFrame({"rank": [r for r, _ in notes], "note": [n for _, n in notes]})
    if fmt in ("json", "markdown"):
        emit({"collectives": table, "note": said}, fmt, output)
    elif fmt == "csv":
        emit(table, fmt, output)
    else:
        lines = "\n".join(f"rank {r} ({names[r]}): {n}" for r, n in notes)
        emit_text(render(table, fmt) + "\n" + fitted(f"{lines}\n", output), output)
    return True


def _why(note: str) -> str:
    """Why a rank has no message sizes: the end of its note (collectives.unsized_note), after what it counted."""
    return note.split("need NCCL's NVTX payloads: ", 1)[-1]


def _skew_line(inst, by_rank) -> str:
    if not inst.height:
        return "skew: no collective instance is in more than one of these exports\n"
    top = by_rank.row(0, named=True)
    return (
        f"skew: {inst.height} collective instances matched across ranks (the k-th call of each communicator), "
        f"median start skew {_dur(inst['skew_ns'].median())}, max {_dur(inst['skew_ns'].max())}; "
        f"rank {top['rank']} arrived last at {top['last_arrivals']} of them, holding the others "
        f"{top['held_others_ns'] / 1e6:.4g} ms in all ({_CLOCKS[inst['clock'][0]]})\n"
    )


def _dur(ns: float) -> str:
    """A skew as people read it: ms with two decimals from a millisecond, else us (never 3.566e+04 us)."""
    return f"{ns / 1e6:,.2f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} us"


# how arrivals were compared (nsysql.analyses.collectives.skew)
_CLOCKS = {
    "utc": "kernel starts on the UTC clock of each export's session; across hosts, as far as their clocks agree",
    "duration": "an export does not say when its session started, so arrivals are told by the kernels' GPU times: "
    "a collective ends together on every rank, the last to arrive having the shortest kernel",
}
