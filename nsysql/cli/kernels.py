"""`nsysql kernels` and `nsysql kernels-by-range`: the kernel tables (as `nsys stats` cuda_gpu_kern_sum and
nvtx_kern_sum), and under them, in a table or Markdown, the one line saying what they leave out: the CUDA graph
launches traced whole, whose kernels nsys did not record (kernels_shown, kernels_by_range_shown); `noted` writes
such an answer, `ops`' too (ops_shown)."""

from __future__ import annotations

import click

from ..render import render
from .common import handled, load_profile, ranked, several
from .declared import declared
from .options import files_options, output_options
from .output import emit_text, fitted, rendered
from .warm import emit_answer


@click.command()
@files_options
@declared("kernels", report=True)
@handled
def kernels(files, fmt, output, **params):
    """Top kernels by total GPU time (as `nsys stats -r cuda_gpu_kern_sum`); several FILEs add a rank column."""
    if several(files):
        _several(files, fmt, output, params)
        return
    prof = load_profile(files[0] if files else None, warm=True, question=("kernels_shown", params))
    emit_answer(prof, "kernels_shown", params, fmt, output, noted(fmt, output))


def noted_command(name: str, analysis: str, doc: str) -> click.Command:
    """The command `name` that prints `<analysis>_shown`'s answer for FILE (its table, and the note under it:
    `noted`), with `analysis`' options; `doc` its help. As declared.answer makes a derived command, with the note."""
    shown = f"{analysis}_shown"

    def run(file, fmt, output, **params):
        prof = load_profile(file, warm=True, question=(shown, params))
        emit_answer(prof, shown, params, fmt, output, noted(fmt, output))

    run.__doc__ = doc
    run.__name__ = name.replace("-", "_")
    fn = declared(analysis, report=True)(handled(run))
    return click.command(name, help=doc)(output_options(fn))


kernels_by_range = noted_command(
    "kernels-by-range", "kernels_by_range", "Kernels per NVTX range (as `nsys stats -r nvtx_kern_sum`)."
)


def _several(files, fmt: str, output: str | None, params: dict) -> None:
    """`kernels FILE FILE...`: the answer across ranks (nsysql.many.kernels_across), and in a table or Markdown,
    under it, each rank's note where it has one, as one file's."""
    from ..many import kernels_across

    got = kernels_across(*ranked(files), params)
    text = rendered(got["table"], fmt, None, output)
    if got["said"] and fmt in ("table", "markdown"):
        said = got["said"]
        text += fitted(f"\n{said}\n", output) if fmt == "table" else f"\n{said}\n"
    emit_text(text, output)


def noted(fmt: str, output: str | None):
    """The text of a `*_shown` answer: its table as the format writes it, and in a table or Markdown the note
    under it where there is one (CSV and JSON stay the table alone, as `nsys stats` writes it)."""

    def text(got, look):
        out = render(got["table"], **look)
        note = got["note"]["note"][0]
        if note is None or fmt not in ("table", "markdown"):
            return out
        return out + (fitted(f"\n{note}\n", output) if fmt == "table" else f"\n{note}\n")

    return text
