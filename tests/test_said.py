"""The sentences a command prints from an analysis's data come with that analysis's answer, so the Python API
returns them: each equal to the line the command prints (no front end builds a sentence from data)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, built_cache

import nsysql
from nsysql.cli import main

RANK0 = FIXTURES / "ddp_blobs" / "rank0.sqlite"
RANK1 = FIXTURES / "ddp_blobs" / "rank1.sqlite"
HW = FIXTURES / "hw_alt" / "hw_alt.sqlite"


def _cli(cache, *args):
    got = CliRunner().invoke(main, ["--cache-dir", str(cache), *map(str, args)], env={"COLUMNS": "1000"})
    assert got.exit_code == 0, got.output
    return got


def test_the_lines_under_iterations_gaps_and_metrics_are_the_answers(tmp_path):
    """iterations' `range:`, steady-state and `outliers:` lines, `gaps --explain`'s `meanwhile: during ...` lines,
    the line naming the graphics counters `metrics` leaves out, and its clocks in MHz: each is in the answer
    (rank 0 of ddp_blobs has outliers, the steps rank 1's sleeps held up; hw_alt's GPU never ran its graphics
    pipeline)."""
    cache = built_cache(tmp_path / "c", RANK0, HW)
    with nsysql.load(RANK0, cache_dir=cache) as p:
        its, gaps = p.iterations_shown(), p.gaps_explained()
    lines = its["said"]["said"].to_list()
    assert lines[0].startswith("range: ") and lines[1].startswith("steady state (")
    assert lines[2].startswith("outliers: ")
    assert _cli(cache, "iterations", RANK0).stdout.endswith("\n\n" + "".join(f"{s}\n" for s in lines))
    said = gaps["said"]["said"].to_list()
    assert said and all(s.startswith(("meanwhile: during ", "time on a CPU: ")) for s in said)
    assert _cli(cache, "gaps", "--explain", RANK0).stdout.endswith("\n" + "".join(f"{s}\n" for s in said))

    with nsysql.load(HW, cache_dir=cache) as p:
        shown, raw, every = p.gpu_metrics_shown(), p.gpu_metrics(), p.gpu_metrics_shown(graphics=True)
    left = shown["left"]["metric"].to_list()
    assert (
        left
        and shown["said"]["said"][0] == f"left out {len(left)} graphics counters at 0 throughout ({', '.join(left)})"
    )
    printed = _cli(cache, "metrics", HW, "--json")
    assert printed.stderr == f"nsysql: {shown['said']['said'][0]}: --graphics lists them\n"
    assert json.loads(printed.stdout) == shown["table"].to_dicts()
    assert every["said"]["said"][0] is None and every["table"].height == raw.height
    assert set(every["table"]["metric"]) - set(shown["table"]["metric"]) == set(left)
    hz = raw.filter((raw["unit"] == "MHz") & (raw["max"] > 1e6))  # nsys wrote Hz: the answer keeps them
    assert hz.height
    mhz = every["table"].join(
        hz.select("device_id", "metric", "unit", hz_max="max"), on=["device_id", "metric", "unit"]
    )
    assert mhz["max"].to_list() == pytest.approx([v / 1e6 for v in mhz["hz_max"]])


def test_ranks_says_how_many_and_how_numbered(tmp_path):
    """`nsysql ranks`' first line on stderr is Ranks.said."""
    cache = built_cache(tmp_path / "c", RANK0, RANK1)
    r = nsysql.load_many([RANK0, RANK1], cache_dir=cache, workers=1)
    assert r.said.startswith("2 ranks; ")
    assert _cli(cache, "ranks", RANK0, RANK1, "--json").stderr.splitlines()[0] == f"nsysql: {r.said}"


def test_one_path_is_answered_as_the_command_answers_one_file(tmp_path):
    """nsysql.collectives(path) is `nsysql collectives FILE`: that export's collectives and findings, not an
    answer across one rank (whose skew would say that no instance is in more than one); `by=rank` is refused."""
    cache = built_cache(tmp_path / "c", RANK0)
    printed = json.loads(_cli(cache, "collectives", RANK0, "--json").stdout)
    for one in (RANK0, [RANK0]):
        got = nsysql.collectives(one, cache_dir=cache)
        assert set(got) == {"collectives", "findings", "said"} and set(printed) == {"collectives", "findings"}
        assert {k: got[k].to_dicts() for k in printed} == printed
    with pytest.raises(nsysql.NsysqlError, match="several exports"):
        nsysql.collectives(RANK0, by="rank", cache_dir=cache)


def test_the_lines_under_collectives_are_the_answers(tmp_path):
    """`collectives FILE`'s lines under its table (the slow-size findings in words and the rule, or, without NCCL's
    payloads, the note saying why there is no size) are the answer's `said`."""
    pair = FIXTURES / "ddp_pair" / "rank0.sqlite"  # no NVTX payloads: no message size
    cache = built_cache(tmp_path / "c", RANK0, pair)
    lines = nsysql.collectives(RANK0, cache_dir=cache)["said"]["said"].to_list()
    assert [s.split(": ", 1)[0] for s in lines] == ["slow collectives", "rule"]
    assert _cli(cache, "collectives", RANK0).stdout.endswith("\n" + "".join(f"{s}\n" for s in lines))
    got = nsysql.collectives(pair, cache_dir=cache)
    assert got["said"]["said"].to_list() == got["note"]["note"].to_list()
    assert _cli(cache, "collectives", pair, "--markdown").stdout.endswith(f"\n{got['note']['note'][0]}\n")


def test_several_files_say_how_many_and_how_numbered(tmp_path):
    """The line a command over several FILEs says first on stderr (how many, and where their rank numbers came
    from) is the library's, nsysql.many.number's."""
    from nsysql.many import number

    cache = built_cache(tmp_path / "c", RANK0, RANK1)
    with nsysql.load(RANK1, cache_dir=cache) as p1, nsysql.load(RANK0, cache_dir=cache) as p0:
        ranks, said = number([p1, p0])
    assert said.startswith("2 files; ") and sorted(ranks) == [0, 1]
    assert _cli(cache, "collectives", RANK1, RANK0, "--json").stderr.splitlines()[0] == f"nsysql: {said}"


def test_a_report_asked_by_nsys_name_counts_as_its_declaration_says(tmp_path):
    """`stats -r nvtx_kern_sum` is kernels_by_range asked with what the declaration says nsys's name means
    (as_nsys: the launching thread's ranges), which on pytorch_nvtx (kernels launched by the autograd thread)
    is not nsysql's default answer."""
    from nsysql.engine import REGISTRY

    export = FIXTURES / "pytorch_nvtx" / "pytorch_nvtx.sqlite"
    cache = built_cache(tmp_path / "c", export)
    as_nsys = REGISTRY["kernels_by_range"].as_nsys
    assert as_nsys == {"attribution": "thread"}
    with nsysql.load(export, cache_dir=cache) as p:
        nsys, own = p.kernels_by_range(**as_nsys), p.kernels_by_range()
    assert nsys.to_dicts() != own.to_dicts()
    printed = json.loads(_cli(cache, "stats", "-r", "nvtx_kern_sum,kernels-by-range", export, "-f", "json").stdout)
    assert printed == {"nvtx_kern_sum": nsys.to_dicts(), "kernels-by-range": own.to_dicts()}


def test_schema_and_the_trace_written_are_said_by_the_library(tmp_path):
    """`nsysql schema [TABLE]` prints nsysql.export.schema_table (a table `export` does not write says so), and
    `nsysql trace`'s line counts what nsysql.perfetto.write wrote, in its words (`said`)."""
    from nsysql import perfetto
    from nsysql.export import schema_table

    tables = schema_table()
    assert json.loads(_cli(tmp_path, "schema", "--json").stdout) == tables.to_dicts()
    assert any(d.endswith("`nsysql export` does not write it)") for d in tables["description"])
    assert json.loads(_cli(tmp_path, "schema", "gpu_ops", "--json").stdout) == schema_table("gpu_ops").to_dicts()
    with pytest.raises(nsysql.NsysqlError, match="no canonical table 'nosuch'"):
        schema_table("nosuch")

    export = FIXTURES / "train_small" / "train_small.sqlite"
    cache = built_cache(tmp_path / "c", export)
    with nsysql.load(export, cache_dir=cache) as p:
        got = perfetto.write(p.trace(), tmp_path / "mine.json", source=str(p.path))
    assert got["said"].startswith(f"{got['events']} events: {got['gpu_ops']} GPU ops, ")
    out = tmp_path / "t.json"
    printed = _cli(cache, "trace", export, "-o", out).stderr
    assert printed.startswith(f"nsysql: wrote {out} (") and printed.endswith(f" MiB, {got['said']})\n")
    assert out.read_bytes() == (tmp_path / "mine.json").read_bytes()
