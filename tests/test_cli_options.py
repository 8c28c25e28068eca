"""The output switches are the same on every command that answers with a table (as sqlite-utils has them): each
command's options, listed from click, hold the common set, defined alike; --top is `--top N` wherever it is."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner
from conftest import built_cache, fixture

from nsysql.cli import main
from nsysql.render import FORMATS

# stats writes one file per report: its -o is a PREFIX, as `nsys stats -o` (and its -f is csv by default, as nsys's)
PREFIX = {"stats"}


def _commands():
    for name, cmd in main.commands.items():
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [(None, cmd)]
        for sub, c in subs:
            yield (f"{name} {sub}" if sub else name), c


def _tables() -> dict[str, click.Command]:
    """The commands whose -f offers a table."""
    out = {}
    for name, cmd in _commands():
        fmt = next((p for p in cmd.params if p.name == "fmt" and not p.is_flag), None)
        if fmt is not None and "table" in getattr(fmt.type, "choices", ()):
            out[name] = cmd
    return out


def _shape(p: click.Parameter) -> tuple:
    """What a user sees of an option: its spellings, type, default, help."""
    typ = p.type
    kind = (type(typ).__name__, tuple(getattr(typ, "choices", ())), getattr(typ, "dir_okay", None))
    return (tuple(p.opts), tuple(p.secondary_opts), kind, p.default, p.help, p.is_flag, p.metavar)


def test_every_table_command_takes_the_same_output_switches():
    tables = _tables()
    # every command that answers with a table, written or derived
    assert {"kernels", "summary", "cpu", "collectives", "ranks", "diff", "schema", "sql", "cache info", "stats"} <= set(
        tables
    )
    reference = {p.name: _shape(p) for p in tables["kernels"].params if isinstance(p, click.Option)}
    common = {"fmt", "wide", "unit", "output"}
    for name, cmd in tables.items():
        opts = [p for p in cmd.params if isinstance(p, click.Option)]
        by_name = {("output" if "-o" in p.opts else p.name): p for p in opts if not p.is_flag or p.name != "fmt"}
        missing = common - set(by_name)
        assert not missing, (name, missing)
        fmt = by_name["fmt"]
        assert fmt.opts == ["-f", "--format"] and fmt.help == "Output format.", name
        assert list(fmt.type.choices[: len(FORMATS)]) == list(FORMATS), name
        # one switch per format: --table, --csv, --json, --markdown (and cpu's --folded)
        switches = {o for p in opts if p.name == "fmt" and p.is_flag for o in p.opts}
        assert switches == {f"--{c}" for c in fmt.type.choices}, name
        for o in ("wide", "unit"):
            assert _shape(by_name[o]) == reference[o], (name, o)
        if name in PREFIX:
            assert by_name["output"].opts == ["-o", "--output"] and by_name["output"].metavar == "PREFIX"
        else:
            assert _shape(by_name["output"]) == reference["output"], name
            assert fmt.default == "table", name


def test_top_is_the_same_option_wherever_an_answer_is_ranked():
    tops = {name: p for name, cmd in _commands() for p in cmd.params if p.name == "top"}
    assert {"kernels", "api", "cpu", "summary", "gaps"} <= set(tops)
    for name, p in tops.items():
        assert p.opts == ["--top"] and p.metavar == "N" and p.type.name.startswith("integer"), name


def test_schema_and_cache_info_write_to_a_file_with_o(tmp_path):
    """Both printed only to stdout before -o was theirs too."""
    out = tmp_path / "schema.json"
    res = CliRunner().invoke(main, ["schema", "gpu_ops", "-f", "json", "-o", str(out)])
    assert res.exit_code == 0 and res.stdout == "", res.output
    rows = json.loads(out.read_text())
    assert {r["column"] for r in rows} >= {"start_ns", "end_ns", "device_id"}
    cache = built_cache(tmp_path / "cache", fixture("train_small"))  # an entry to list, as a first load leaves it
    assert CliRunner().invoke(main, ["--cache-dir", str(cache), "info", str(fixture("train_small"))]).exit_code == 0
    info = tmp_path / "cache.csv"
    res = CliRunner().invoke(main, ["--cache-dir", str(cache), "cache", "info", "-f", "csv", "-o", str(info)])
    assert res.exit_code == 0 and res.stdout == "", res.output
    assert str(fixture("train_small")) in info.read_text()
