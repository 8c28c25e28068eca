"""`nsysql ranks --range` (load_many's `range`): every rank's loop named by the user, where detection cannot find
it or finds another; the sentence "name the loop with --range PATTERN" that a rank without a loop gets is then an
option ranks takes. The frames stored per range are a set of their own."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, built_cache, raw

import nsysql
from nsysql.cli import main

PAIR = [str(FIXTURES / "ddp_pair" / f"rank{i}.sqlite") for i in (0, 1)]
COUNT = (
    "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId WHERE coalesce(e.text, s.value) = ?"
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module, holding the entries a first load builds (no frames stored): the command's test
    reads the frames the library's test stored."""
    return built_cache(tmp_path_factory.mktemp("ranks_range"), *PAIR)


def test_ranks_take_the_loop_given_and_store_it_apart(cache):
    tmp_path = cache
    detected = nsysql.load_many(PAIR, cache_dir=tmp_path, workers=1)
    forward = nsysql.load_many(PAIR, cache_dir=tmp_path, workers=1, range="forward")
    assert set(detected.iterations()["name"]) == {"step"}
    assert set(forward.iterations()["name"]) == {"forward"}
    for r, path in enumerate(PAIR):  # one iteration per `forward` range of the rank's export
        assert forward.iterations().filter(rank=r).height == raw(path, COUNT, "forward")[0][0]
    # warm, from the frames stored for each: the same answers, neither taken for the other
    assert set(nsysql.load_many(PAIR, cache_dir=tmp_path, range="forward").iterations()["name"]) == {"forward"}
    assert set(nsysql.load_many(PAIR, cache_dir=tmp_path).iterations()["name"]) == {"step"}
    named = nsysql.load_many(PAIR, cache_dir=tmp_path, workers=1, range="step")
    assert named.per_rank().equals(detected.per_rank())  # the detected loop, named: the same answer


def test_ranks_command_takes_range(cache):
    tmp_path = cache
    res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path), "ranks", *PAIR, "--range", "forward", "-f", "json"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        main, ["--cache-dir", str(tmp_path), "ranks", *PAIR, "--range", "no_such_range", "--workers", "1"]
    )
    assert res.exit_code == 2 and "no_such_range" in res.stderr, res.stderr
