#!/usr/bin/env python3
"""Sanity checks for generated (or real) nsys SQLite exports.

    python benchmarks/check_export.py FILE [--src SRC] [--iter-regex RE]

Checks (all read-only):
  * start <= end in every table that has both columns (and counts start == end)
  * every kernel / memcpy / memset / synchronization row's correlationId
    matches exactly one CUPTI_ACTIVITY_KIND_RUNTIME row of the same process
    (globalTid >> 24 == globalPid >> 24); runtime correlationIds are unique
  * kernel gridIds are unique; kernels on one (device, stream) do not overlap
  * all NVTX ranges (and all events) lie inside ANALYSIS_DETAILS [startTime, stopTime]
  * NVTX push/pop ranges nest properly per thread (child inside parent)
  * per-iteration kernel count (kernels whose launch call starts inside an
    iteration range matching --iter-regex); with --src the distribution is
    compared against the source file's iterations
Exit status 1 if a hard check fails.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import re
import sqlite3
import sys

GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
)


def connect(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def tables(con):
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def cols(con, t):
    return [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]


def iteration_kernel_counts(con, regex):
    """{iteration name: kernels launched from inside it} (launch-call start in range)."""
    rx = re.compile(regex)
    names = [
        t
        for (t,) in con.execute("SELECT DISTINCT text FROM NVTX_EVENTS WHERE text IS NOT NULL AND eventType IN (59,60)")
        if rx.fullmatch(t)
    ]
    names += [
        v
        for (v,) in con.execute(
            "SELECT value FROM StringIds WHERE id IN (SELECT DISTINCT textId FROM NVTX_EVENTS "
            "WHERE textId IS NOT NULL AND eventType IN (59,60))"
        )
        if rx.fullmatch(v)
    ]
    if not names:
        return {}
    con.execute("CREATE TEMP TABLE IF NOT EXISTS _it (name TEXT PRIMARY KEY)")
    con.execute("DELETE FROM _it")
    con.executemany("INSERT OR IGNORE INTO _it VALUES (?)", [(n,) for n in names])
    its = con.execute(
        "SELECT coalesce(n.text, s.value), n.start, n.end, n.globalTid FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId AND n.text IS NULL "
        "WHERE n.eventType IN (59,60) AND n.end IS NOT NULL "
        "AND coalesce(n.text, s.value) IN (SELECT name FROM _it) ORDER BY n.start"
    ).fetchall()
    # launch-call start of every kernel, per process (backward kernels are
    # launched from the autograd thread, not the thread that owns the range)
    launches = con.execute(
        "SELECT r.globalTid >> 24, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "AND (r.globalTid >> 24) = (k.globalPid >> 24)"
    ).fetchall()
    by_tid = collections.defaultdict(list)
    for tid, s in launches:
        by_tid[tid].append(s)
    arr = {tid: sorted(v) for tid, v in by_tid.items()}
    out = {}
    for name, s, e, tid in its:
        a = arr.get(tid >> 24)  # any thread of the iteration's process
        n = 0 if a is None else bisect.bisect_right(a, e) - bisect.bisect_left(a, s)
        out[name] = out.get(name, 0) + n
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--src", help="source export to compare per-iteration kernel counts with")
    ap.add_argument("--iter-regex", default=r"Batch\d+")
    ap.add_argument("--skip-iters", type=int, default=1)
    a = ap.parse_args(argv)
    con = connect(a.file)
    T = tables(con)
    fails = []

    def check(ok, msg):
        print(("  ok    " if ok else "  FAIL  ") + msg)
        if not ok:
            fails.append(msg)

    print(f"== {a.file}")
    # ---- start/end
    for t in T:
        c = cols(con, t)
        if "start" in c and "end" in c:
            bad, eq, n = con.execute(f'SELECT sum("end" < start), sum("end" = start), count(*) FROM "{t}"').fetchone()
            if n:
                check(not bad, f"{t}: {n:,d} rows, end<start {bad or 0}, end=start {eq or 0}")

    # ---- correlation
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in T:
        dup = con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            "WHERE correlationId IS NOT NULL GROUP BY globalTid >> 24, correlationId "
            "HAVING count(*) > 1)"
        ).fetchone()[0]
        check(dup == 0, f"runtime correlationIds unique per process (duplicates: {dup})")
        con.execute(
            "CREATE TEMP TABLE _rt AS SELECT globalTid >> 24 AS p, correlationId AS c, "
            "count(*) AS n FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IS NOT NULL "
            "GROUP BY 1, 2"
        )
        con.execute("CREATE INDEX _rt_i ON _rt (p, c)")
        for t in GPU_TABLES:
            if t not in T:
                continue
            n, bad = con.execute(
                f'SELECT count(*), sum(coalesce(r.n, 0) != 1) FROM "{t}" g '
                f"LEFT JOIN _rt r ON r.p = (g.globalPid >> 24) AND r.c = g.correlationId"
            ).fetchone()
            check(not bad, f"{t}: {n:,d} rows, correlationId without exactly one runtime row: {bad or 0}")
    if "CUPTI_ACTIVITY_KIND_KERNEL" in T:
        n, d = con.execute("SELECT count(*), count(DISTINCT gridId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        check(n == d, f"kernel gridIds unique ({d:,d} distinct of {n:,d})")
        ov, prev = 0, (None, None, None)
        for d, st, s, e in con.execute(
            'SELECT deviceId, streamId, start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY deviceId, streamId, start'
        ):
            if prev[0] == d and prev[1] == st and s < prev[2]:
                ov += 1
            prev = (d, st, e if prev[0] != d or prev[1] != st or prev[2] is None else max(prev[2], e))
        if n > 1:
            check(ov == 0, f"kernels on the same (device, stream) do not overlap (overlaps: {ov})")

    # ---- span
    if "ANALYSIS_DETAILS" in T:
        t0, t1 = con.execute("SELECT startTime, stopTime FROM ANALYSIS_DETAILS").fetchone()
        for t in T:
            c = cols(con, t)
            if "start" in c:
                endc = '"end"' if "end" in c else "start"
                mn, mx, n = con.execute(
                    f'SELECT min(start), max(coalesce({endc}, start)), count(*) FROM "{t}"'
                ).fetchone()
                if not n:
                    continue
                msg = f"{t} inside span [{t0}, {t1}]: min start {mn}, max end {mx}"
                if t == "NVTX_EVENTS" or t.startswith("CUPTI_ACTIVITY_KIND"):
                    check(mn >= t0 and mx <= t1, msg)
                elif not (mn >= t0 and mx <= t1):
                    # real exports have OSRT / profiler-overhead rows from process
                    # launch before startTime; report, don't fail
                    print("  warn  " + msg)
                else:
                    check(True, msg)
    # ---- NVTX nesting
    if "NVTX_EVENTS" in T:
        rows = con.execute(
            'SELECT globalTid, start, "end" FROM NVTX_EVENTS WHERE eventType = 59 '
            'AND "end" IS NOT NULL ORDER BY globalTid, start, "end" DESC'
        ).fetchall()
        bad, stack, cur, depth_max = 0, [], None, 0
        for tid, s, e in rows:
            if tid != cur:
                stack, cur = [], tid
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and e > stack[-1]:
                bad += 1
            stack.append(e)
            depth_max = max(depth_max, len(stack))
        check(
            bad == 0,
            f"NVTX push/pop ranges nest per thread ({len(rows):,d} ranges, max depth {depth_max}, crossing: {bad})",
        )

    # ---- per-iteration kernel counts
    if "NVTX_EVENTS" in T and "CUPTI_ACTIVITY_KIND_KERNEL" in T:
        cnt = iteration_kernel_counts(con, a.iter_regex)
        if cnt:
            vals = collections.Counter(cnt.values())
            print(
                f"  info  {len(cnt):,d} iteration ranges; kernels per iteration -> #iterations: "
                f"{dict(sorted(vals.items()))}"
            )
            if a.src:
                scon = connect(a.src)
                scnt = iteration_kernel_counts(scon, a.iter_regex)

                def num(s):
                    return int(re.findall(r"\d+", s)[-1])

                src_items = sorted(scnt.items(), key=lambda kv: num(kv[0]))
                win = [v for _, v in src_items[a.skip_iters :]]
                nwin = len(win)
                first = num(src_items[a.skip_iters][0])
                mism = 0
                for name, v in cnt.items():
                    i = num(name)
                    if i >= first:
                        if v != win[(i - first) % nwin]:
                            mism += 1
                    elif scnt.get(name) != v:
                        mism += 1
                check(
                    mism == 0,
                    f"per-iteration kernel counts equal the source iteration "
                    f"they were copied from (source window: {dict(collections.Counter(win))}; "
                    f"mismatches {mism})",
                )
    print("RESULT:", "FAIL" if fails else "all checks passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
