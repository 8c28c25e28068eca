"""ops_by_iteration (00_macros.sql): each op in the window that holds its launch instant, by a bucketed equi-join,
or an ASOF join for ops in buckets that many tiny windows crowd; checked against the windows' containment, worked
out here in Python, for windows of both kinds."""

from conftest import fixture, loaded


def _launches(prof) -> list[tuple[int, int]]:
    return [tuple(r) for r in prof.sql("SELECT op_id, coalesce(api_start_ns, start_ns) FROM gpu_ops_named").rows()]


def _placed(prof, windows: list[tuple[int, int, int]]) -> dict[int, int]:
    values = ", ".join(f"({i}, {a}, {b})" for i, a, b in windows)
    rows = prof.sql(
        f"WITH w(iteration, start_ns, end_ns) AS (VALUES {values}), mine AS (SELECT op_id, api_start_ns, start_ns "
        "FROM gpu_ops_named) SELECT op_id, iteration FROM ops_by_iteration('mine', 'w')"
    ).rows()
    assert len(rows) == len({r[0] for r in rows}), "an op placed twice"
    return {op: it for op, it in rows}


def _expected(launches, windows) -> dict[int, int]:
    return {op: i for op, t in launches for i, a, b in windows if a <= t < b}


def test_each_op_lands_in_the_window_holding_its_launch_whether_windows_are_even_or_crowded():
    prof = loaded(str(fixture("train_small")))
    launches = _launches(prof)
    lo, hi = min(t for _, t in launches), max(t for _, t in launches)
    step = (hi - lo) // 7 + 1
    even = [
        (i, lo + i * step, lo + (i + 1) * step - 3) for i in range(7)
    ]  # 3 ns between windows: ops there are in none
    got = _placed(prof, even)
    assert got == _expected(launches, even) and len(got) > len(launches) // 2
    # 40 windows of 2 ns at the 40 launches closest together, closer than a 169th of the windows' span (the widest
    # bucket 42 windows get): one or two buckets hold them all, the ASOF side; and two long windows before and
    # after them (the bucketed side)
    ts = sorted({t for _, t in launches})
    k = min(range(len(ts) - 39), key=lambda i: ts[i + 39] - ts[i])
    cluster = ts[k : k + 40]
    assert (cluster[-1] - cluster[0]) * 169 * 2 < hi - lo
    tiny = [(i, t, t + 2) for i, t in enumerate(cluster)]
    long = [(100, lo, cluster[0]), (101, cluster[-1] + 2, hi + 1)]
    got = _placed(prof, tiny + long)
    want = _expected(launches, tiny + long)
    assert got == want and len({it for it in want.values() if it < 100}) == 40 and {100, 101} <= set(want.values())
