"""`nsysql collectives`: NCCL collectives measured from their NVTX payloads, per group, across ranks."""

from __future__ import annotations

import click
from click.core import ParameterSource

from ..render import render
from .common import handled, load_profile, ranked, several
from .declared import about, declared
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
        if click.get_current_context().get_parameter_source("slow_ratio") is not ParameterSource.DEFAULT:
            # the ratio judges one rank's calls against their kind and size's median; across ranks the answer
            # is who arrived last at each collective, which it does not change: said, not ignored
            raise click.UsageError("--slow-ratio judges one FILE's calls: with several FILEs, give one at a time")
        _many(files, fmt, output, by, range)
        return
    if by == "rank":
        raise click.UsageError("--by rank needs several FILEs, one per rank")
    asked = {"by": by, "range": range, "slow_ratio": slow_ratio}
    got = load_profile(files[0] if files else None, question=("collectives_shown", asked)).collectives_shown(**asked)
    df = got["collectives"]
    # without message sizes (no NVTX payloads): the kinds by kernel name, and the note saying why, not findings
    noted = "note" in got
    if fmt == "json" or (fmt == "markdown" and not noted):
        emit({"collectives": df, **{k: got[k] for k in ("note", "findings") if k in got}}, fmt, output)
    elif fmt == "csv":
        emit(df, fmt, output)
    else:  # the lines under the table (`said`), whole: a table's cell would cut the note
        said = "".join(f"{line}\n" for line in got["said"]["said"])
        text = render(df, fmt) + "\n"
        emit_text(text + (fitted(said, output) if noted and fmt == "table" else said), output)


def _many(files, fmt, output, by, range_):
    """Several FILEs: the answer across ranks (nsysql.many.collectives_across), its lines under the table; where
    it carries a note (no message sizes), they wrap as one file's note does."""
    from ..many import collectives_across

    got = collectives_across(*ranked(files), by, range_)
    if fmt in ("json", "markdown"):
        emit({k: got[k] for k in ("collectives", "skew", "note") if k in got}, fmt, output)
    elif fmt == "csv":
        emit(got["collectives"], fmt, output)
    else:
        said = f"{got['said']}\n"
        emit_text(
            render(got["collectives"], "table") + "\n" + (fitted(said, output) if "note" in got else said), output
        )


about(collectives, python="`p.collectives()`; several FILEs: `nsysql.collectives(paths)`")
