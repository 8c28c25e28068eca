"""The standard deviation column of the nsys-stats summaries (`kernels`, `api`, `ranges`, `launches`,
`kernels-by-range`: the canonical macro stats_stddev) is the same on every run: computed from exact integer
sums, it does not depend on the order DuckDB's threads hand the rows over in, which changes from run to run
on an export of more than one row group (a cold `stats` gave 4563.510685117969 once, ...118063 the next)."""

from __future__ import annotations

import math
import statistics

from conftest import built_cache, fixture

import nsysql

# 200,000 durations, spread over 8e9 ns, in three orders
VALUES = "SELECT (hash(range) % 1000003)::BIGINT * 7919 + 1000 AS x FROM range(200000)"


def test_the_sample_stddev_is_exact_whatever_the_order_of_the_rows(tmp_path):
    small = fixture("train_small")
    prof = nsysql.load(small, cache_dir=built_cache(tmp_path / "cache", small))
    said = {
        order: prof.sql(f"SELECT stats_stddev(x) AS s FROM (SELECT x FROM ({VALUES}) ORDER BY {order})")["s"][0]
        for order in ("x", "x DESC", "hash(x)")
    }
    xs = prof.sql(VALUES)["x"].to_list()
    n, s1, s2 = len(xs), sum(xs), sum(x * x for x in xs)
    exact = math.sqrt((n * s2 - s1 * s1) / (n * (n - 1)))  # int / int: the quotient rounded once
    assert len(set(said.values())) == 1, said
    assert math.isclose(said["x"], exact, rel_tol=1e-15), (said, exact)
    # one value: 0, as nsys stats says it; none: 0
    assert prof.sql("SELECT stats_stddev(x) AS s FROM (VALUES (5::BIGINT)) v(x)")["s"][0] == 0
    # durations beyond what squares exactly (hostile exports: up to 2^63 ns) and fractions: the floating-point
    # deviation, never an overflow
    for values in ("(9000000000000000000::BIGINT), (-9223372036854775808), (1)", "(1.5::DOUBLE), (2.5), (4.0)"):
        got = prof.sql(f"SELECT stats_stddev(x) AS s FROM (VALUES {values}) v(x)")["s"][0]
        xs = [float(v.split("::")[0].strip("()")) for v in values.split(", ")]
        assert math.isclose(got, statistics.stdev(xs), rel_tol=1e-9), (values, got)
    prof.close()
