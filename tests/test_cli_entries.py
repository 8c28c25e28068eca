"""A command parses, asks one entry of the library, renders: what it shows is a declaration's answer
(iterations_shown, collectives_shown, gaps_explained; stats' reports through Profile.each), not a composition of
the command's own."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, built_cache, fixture

import nsysql
from nsysql.cli import main
from nsysql.engine import Engine

SMALL = fixture("train_small")
BLOBS = FIXTURES / "ddp_blobs" / "rank0.sqlite"
ENGINE = str(Path(inspect.getfile(Engine)).parent)


@pytest.fixture
def entries(monkeypatch):
    """The requests made of the engine from outside it (a front end, through the Profile): the names asked."""
    asked: list[str] = []

    def spy(method):
        real = getattr(Engine, method, None)
        if real is None:  # an engine without that entry: nothing to watch
            return

        def call(self, *args, **kwargs):
            caller = inspect.stack(0)[1].filename
            if not caller.startswith(ENGINE):  # an analysis' own needs are asked from inside the engine
                asked.append(args[0] if method in ("run", "shown") else method)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Engine, method, call)

    spy("run")
    spy("shown")  # an answer as its command shows it (Profile.shown): one request, its refusal included
    spy("each")
    return asked


@pytest.mark.parametrize(
    "args",
    [
        ["iterations", str(SMALL)],
        ["iterations", str(SMALL), "-f", "json"],
        ["collectives", str(BLOBS)],
        ["gaps", str(SMALL), "--explain"],
        ["stats", str(SMALL)],
        ["stats", str(SMALL), "-r", "kernels,ops,gaps-by-cause", "--attribution", "thread"],
    ],
)
def test_a_command_asks_one_entry(tmp_path, entries, args):
    # no answer stored (a warm command would read it without the engine): the entry a first load builds
    cache = built_cache(tmp_path / "cache", Path(args[1]))
    res = CliRunner().invoke(main, ["--cache-dir", str(cache), *args])
    assert res.exit_code == 0, res.output
    assert len(entries) == 1, entries


def test_what_iterations_shows_is_the_iteration_analyses_answers():
    with nsysql.load(str(SMALL)) as p:
        shown = p.iterations_shown()
        assert shown["iterations"].equals(p.iterations())
        assert shown["steady state"].equals(p.iteration_stats())
        note = shown["note"].row(0, named=True)
        assert note == p.iteration_note()
    # by construction of the workload: every 5th batch sleeps 20 ms while loading (train_steps.py)
    assert "every 5th" in note["outliers"]
    res = CliRunner().invoke(main, ["iterations", str(SMALL)])
    assert res.stdout.endswith(f"{note['steady']}\noutliers: {note['outliers']}\n")
    doc = json.loads(CliRunner().invoke(main, ["iterations", str(SMALL), "-f", "json"]).stdout)
    assert set(doc) == {"iterations", "steady state"}  # the note is the table's


def test_what_collectives_shows_is_the_collective_analyses_answers():
    with nsysql.load(str(BLOBS)) as p:
        shown = p.collectives_shown(by="kind")
        assert shown["collectives"].equals(p.collectives(by="kind"))
        assert shown["findings"].equals(p.collective_findings())


def test_gaps_explained_says_what_the_cpu_did_per_cause():
    with nsysql.load(str(SMALL)) as p:
        shown = p.gaps_explained(top=5)
        assert shown["activity"].equals(p.gap_activity(top=5))
        told = p.cpu(during="gaps", by="cause").drop_nulls("meanwhile")
    said = shown["meanwhile"]
    # each cause the CPU story tells of, in its order; the rest once each
    assert said.drop_nulls("cause")["cause"].to_list() == told.filter(told["told"])["cause"].to_list()
    assert sorted(said.filter(said["cause"].is_null())["meanwhile"]) == sorted(
        set(told.filter(~told["told"])["meanwhile"])
    )
    res = CliRunner().invoke(main, ["gaps", str(SMALL), "--explain"])  # the session's cache
    assert all(m in res.stdout for m in said["meanwhile"])


def test_info_lists_no_view():
    """iterations_shown and the like are what a command shows, not questions: info lists the commands only."""
    with nsysql.load(str(SMALL)) as p:
        info = p.info()
        listed = set(info.filter(info["section"] == "commands")["item"])
    assert "iterations" in listed and "collectives" in listed
    assert not listed & {"iterations_shown", "collectives_shown", "gaps_explained"}
