#!/usr/bin/env python3
"""Scale a real Nsight Systems SQLite export up by replicating its iterations.

    python benchmarks/gen_scaled.py SRC OUT --kernels N [--seed S] [--jitter PCT]
                                    [--rank R] [--iter-regex RE] [--skip-iters K]

OUT gets exactly SRC's schema (every CREATE TABLE / CREATE INDEX statement of
sqlite_master, verbatim) and:

* small / non-event tables (StringIds, PROCESSES, ThreadNames, TARGET_INFO_*,
  ENUM_*, META_DATA_*, OSRT_CALLCHAINS, ...) copied row for row;
* every event table (any table with a ``start`` or ``timestamp`` column, plus
  GPU-side tables with ``correlationId`` + ``globalPid``) split in three parts:

  - prefix   rows before the iteration window              -> copied unchanged
  - window   rows inside the window                        -> copied K times,
                                                              copy k shifted
  - tail     rows after the window                         -> shifted behind
                                                              the last copy

The window is defined by the outermost NVTX push/pop or start/end ranges whose
(inline or registered) name fully matches ``--iter-regex`` (default
``Batch\\d+``).  The first ``--skip-iters`` (default 1, the warm-up
iteration) are left in the prefix; the window runs from the start of the next
iteration range to the end of the last one plus the median gap between
consecutive iterations (= window length L).

CPU-side rows (runtime, OSRT, NVTX, ...) are classified by their start time.
GPU-side rows (kernels, memcpy, memset, synchronization, CUDA events, graph
traces, ...) are classified by the class of the runtime call with the same
(process, correlationId), so a launch and its kernel always travel together even
if the kernel runs after the window end.  Rows without a matching runtime call
fall back to their own timestamp.

Copy k (k = 0 .. K-1, copy 0 = the original position) gets

    start/end/timestamp  + k*L          (or base_k + (t - W0) * f_k with --jitter)
    correlationId        + k*(max correlationId + 1)   (all tables consistently)
    gridId               + k*(max gridId + 1)
    NVTX rangeId         + k*(max rangeId + 1)
    iteration names      Batch17 -> Batch{17 + k*n_iters}
                         (inline text rewritten; for registered textId names new
                          StringIds rows are appended)

and tail rows are shifted by the total added length (and their correlation /
grid ids by (K-1) blocks), so ids stay unique and roughly time ordered.
Everything runs as INSERT ... SELECT inside SQLite against the source ATTACHed
read-only; Python never loops over event rows.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import statistics
import sys
import time

# NVTX event types that are actual events on the timeline and are replicated.
# (59 PushPop, 60 StartEnd, 34 Mark, 35-38 push/pop/start/end, 65-71 NVTXT.)
# Domain create/destroy (75/76), category and resource naming are not.
NVTX_REPLICATED_TYPES = (34, 35, 36, 37, 38, 59, 60, 65, 66, 67, 68, 69, 70, 71)
NVTX_RANGE_TYPES = (59, 60, 70, 71)
# Tables with timestamps that should only be shifted, never replicated.
NO_REPLICATE = {"DIAGNOSTIC_EVENT"}
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
RANK_NAME_ENUM = 100000  # nameEnum used when a RANK row has to be created


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("src", help="source nsys SQLite export (opened read-only)")
    p.add_argument("out", help="output SQLite file (overwritten)")
    p.add_argument("--kernels", type=int, required=True, help="target number of rows in CUPTI_ACTIVITY_KIND_KERNEL")
    p.add_argument("--seed", type=int, default=0, help="RNG seed for --jitter")
    p.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        metavar="PCT",
        help="scale each copy's durations/gaps by a random factor in [1-PCT/100, 1+PCT/100] (per copy, seeded)",
    )
    p.add_argument(
        "--rank",
        type=int,
        default=None,
        help="set RANK=R in TARGET_INFO_SYSTEM_ENV (row 'RANK' and the "
        "DeviceEnvironment variable list) if that table exists",
    )
    p.add_argument(
        "--iter-regex",
        default=r"Batch\d+",
        help="regex (full match) for iteration NVTX range names; the last run of digits is the iteration number",
    )
    p.add_argument("--skip-iters", type=int, default=1, help="leading iterations kept out of the window (warm-up)")
    p.add_argument("--copies", type=int, default=None, help="force the number of window copies (overrides --kernels)")
    return p.parse_args(argv)


def cols_of(con, schema, table):
    return [(r[1], r[5]) for r in con.execute(f"PRAGMA {schema}.table_info({q(table)})")]


def find_iterations(con, regex):
    """Outermost NVTX ranges whose name fully matches regex -> list of dicts."""
    rx = re.compile(regex)
    types = ",".join(map(str, NVTX_RANGE_TYPES))
    names = {}
    for (t,) in con.execute(f"SELECT DISTINCT text FROM src.{NVTX} WHERE text IS NOT NULL AND eventType IN ({types})"):
        if rx.fullmatch(t):
            names[("text", t)] = t
    for sid, val in con.execute(
        f"SELECT id, value FROM src.StringIds WHERE id IN "
        f"(SELECT DISTINCT textId FROM src.{NVTX} WHERE textId IS NOT NULL "
        f"AND eventType IN ({types}))"
    ):
        if rx.fullmatch(val):
            names[("textId", sid)] = val
    if not names:
        return []
    texts = [k[1] for k in names if k[0] == "text"]
    tids = [k[1] for k in names if k[0] == "textId"]
    conds = []
    if texts:
        conds.append("text IN (%s)" % ",".join("?" * len(texts)))
    if tids:
        conds.append("(text IS NULL AND textId IN (%s))" % ",".join("?" * len(tids)))
    rows = con.execute(
        f"SELECT rowid, start, end, text, textId, globalTid FROM src.{NVTX} "
        f"WHERE end IS NOT NULL AND eventType IN ({types}) AND ({' OR '.join(conds)}) "
        f"ORDER BY start, end DESC",
        texts + tids,
    ).fetchall()
    its = []
    for rid, s, e, text, tid, gtid in rows:
        name = text if text is not None else names[("textId", tid)]
        its.append(dict(rid=rid, start=s, end=e, name=name, inline=text is not None, textId=tid, gtid=gtid))
    # keep only outermost (not contained in another matching range)
    outer, cur_end = [], None
    for it in its:
        if cur_end is not None and it["end"] <= cur_end:
            continue  # nested inside an earlier (outer) iteration range
        outer.append(it)
        cur_end = it["end"] if cur_end is None else max(cur_end, it["end"])
    for it in outer:
        m = None
        for m in re.finditer(r"\d+", it["name"]):
            pass
        if m is None:
            sys.exit(f"iteration name {it['name']!r} has no number to renumber")
        it["prefix"], it["num"], it["suffix"] = (it["name"][: m.start()], int(m.group()), it["name"][m.end() :])
    return outer


def main(argv=None):
    a = parse_args(argv)
    t_start = time.perf_counter()
    if not os.path.exists(a.src):
        sys.exit(f"no such file: {a.src}")
    if os.path.abspath(a.src) == os.path.abspath(a.out):
        sys.exit("OUT must differ from SRC")
    tmp = a.out + ".partial"  # renamed to OUT only on success
    if os.path.exists(tmp):
        os.remove(tmp)
    try:
        build(a, tmp, t_start)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def build(a, tmp, t_start):
    con = sqlite3.connect(tmp, isolation_level=None)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA locking_mode=EXCLUSIVE")
    con.execute("PRAGMA temp_store=MEMORY")
    con.execute("PRAGMA cache_size=-262144")  # 256 MiB
    src_uri = "file:" + os.path.abspath(a.src) + "?mode=ro"
    con.execute("ATTACH DATABASE ? AS src", (src_uri,))

    # ---------------------------------------------------------------- schema
    schema = con.execute(
        "SELECT type, name, sql FROM src.sqlite_master WHERE sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%' ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"
    ).fetchall()
    tables = [n for t, n, _ in schema if t == "table"]
    page = con.execute("PRAGMA src.page_size").fetchone()[0]
    con.execute(f"PRAGMA main.page_size={int(page)}")
    con.execute("BEGIN")
    for t, n, sql in schema:
        if t == "table":
            con.execute(sql)

    tcols = {t: cols_of(con, "src", t) for t in tables}
    colnames = {t: [c for c, _ in tcols[t]] for t in tables}

    # ---------------------------------------------------------------- window
    its = find_iterations(con, a.iter_regex) if NVTX in tables else []
    if len(its) <= a.skip_iters:
        sys.exit(
            f"found {len(its)} iteration ranges matching {a.iter_regex!r}; need more than --skip-iters={a.skip_iters}"
        )
    win_its = its[a.skip_iters :]
    n_iters = len(win_its)
    W0 = win_its[0]["start"]
    last_end = max(it["end"] for it in win_its)
    gaps = [b["start"] - p["end"] for p, b in zip(win_its, win_its[1:])]
    gap = max(0, int(statistics.median(gaps))) if gaps else 0
    L = last_end - W0 + gap
    W1 = W0 + L

    # ----------------------------------------------- runtime classification
    # class: 0 prefix, 1 window, 2 tail (by runtime call start)
    def tcls(col):
        return f"(CASE WHEN {col} < {W0} THEN 0 WHEN {col} < {W1} THEN 1 ELSE 2 END)"

    has_rt = RUNTIME in tables
    if has_rt:
        con.execute("CREATE TEMP TABLE rtc (p INTEGER, corr INTEGER, cls INTEGER, PRIMARY KEY (p, corr)) WITHOUT ROWID")
        con.execute(
            f"INSERT OR IGNORE INTO rtc SELECT globalTid >> 24, correlationId, "
            f"{tcls('start')} FROM src.{RUNTIME} WHERE correlationId IS NOT NULL"
        )

    def table_kind(t):
        cn = colnames[t]
        if t == RUNTIME:
            return "time", "start"
        timecol = "start" if "start" in cn else ("timestamp" if "timestamp" in cn else None)
        if "correlationId" in cn and "globalPid" in cn and "globalTid" not in cn and has_rt:
            return "gpu", timecol
        if timecol:
            return "time", timecol
        return None, None

    event_tables = [t for t in tables if table_kind(t)[0] is not None]

    # classify rows of every event table into temp copies (source sized, small)
    counts = {}
    for t in event_tables:
        kind, timecol = table_kind(t)
        tc = tcls("t." + q(timecol)) if timecol else "0"
        if kind == "gpu":
            cls = f"COALESCE(r.cls, {tc})"
            join = "LEFT JOIN rtc r ON r.p = (t.globalPid >> 24) AND r.corr = t.correlationId"
        else:
            cls, join = tc, ""
        con.execute(
            f"CREATE TEMP TABLE {q('c_' + t)} AS SELECT t.rowid AS _rid, {cls} AS _cls, t.* "
            f"FROM src.{q(t)} t {join} ORDER BY t.rowid"
        )
        counts[t] = dict(con.execute(f"SELECT _cls, count(*) FROM {q('c_' + t)} GROUP BY 1").fetchall())

    # ------------------------------------------------------ number of copies
    KT = "CUPTI_ACTIVITY_KIND_KERNEL"
    kc = counts.get(KT, {})
    k_pre, k_win, k_tail = kc.get(0, 0), kc.get(1, 0), kc.get(2, 0)
    if a.copies is not None:
        K = max(1, a.copies)
    else:
        if k_win == 0:
            sys.exit("no kernels inside the iteration window")
        K = max(1, round((a.kernels - k_pre - k_tail) / k_win))

    def maxof(col, tabs):
        m = -1
        for t in tabs:
            if col in colnames[t]:
                v = con.execute(f"SELECT max({q(col)}) FROM src.{q(t)}").fetchone()[0]
                if v is not None:
                    m = max(m, v)
        return m + 1

    C = maxof("correlationId", event_tables)
    G = maxof("gridId", event_tables)
    R = maxof("rangeId", [NVTX] if NVTX in tables else [])
    S = con.execute("SELECT coalesce(max(id), -1) + 1 FROM src.StringIds").fetchone()[0] if "StringIds" in tables else 0

    rng = random.Random(a.seed)
    p = a.jitter / 100.0
    con.execute(
        "CREATE TEMP TABLE seq (k INTEGER PRIMARY KEY, base INTEGER, f REAL, "
        "dt INTEGER, dcorr INTEGER, dgrid INTEGER, drange INTEGER, dstr INTEGER)"
    )
    seq, base = [], W0
    for k in range(K):
        f = 1.0 + rng.uniform(-p, p) if p > 0 else 1.0
        seq.append((k, base, f, base - W0, k * C, k * G, k * R, S + (k - 1) * n_iters))
        base += int(round(L * f))
    con.executemany("INSERT INTO seq VALUES (?,?,?,?,?,?,?,?)", seq)
    tail_dt = base - W1  # how far rows after the window move
    tail_corr, tail_grid, tail_range = (K - 1) * C, (K - 1) * G, (K - 1) * R

    # iteration ranges to rename, keyed by source NVTX rowid
    con.execute(
        "CREATE TEMP TABLE iter (rid INTEGER PRIMARY KEY, j INTEGER, prefix TEXT, "
        "num INTEGER, suffix TEXT, inline INTEGER)"
    )
    con.executemany(
        "INSERT INTO iter VALUES (?,?,?,?,?,?)",
        [(it["rid"], j, it["prefix"], it["num"], it["suffix"], int(it["inline"])) for j, it in enumerate(win_its)],
    )
    n_textid_iters = sum(1 for it in win_its if not it["inline"])

    # -------------------------------------------------------- copy plain tables
    for t in tables:
        if t in event_tables:
            continue
        cl = ",".join(q(c) for c in colnames[t])
        con.execute(f"INSERT INTO main.{q(t)} ({cl}) SELECT {cl} FROM src.{q(t)} ORDER BY rowid")

    # new StringIds rows for renamed registered-string iteration names
    if n_textid_iters and K > 1:
        con.execute(
            f"INSERT INTO main.StringIds (id, value) SELECT s.dstr + i.j, "
            f"i.prefix || (i.num + s.k * {n_iters}) || i.suffix "
            f"FROM seq s CROSS JOIN iter i WHERE s.k >= 1 AND i.inline = 0 "
            f"ORDER BY s.k, i.j"
        )

    # ------------------------------------------------------- event tables
    def tmap(col, mode):
        c = "w." + q(col)
        if mode == "copy":
            if p > 0:
                return f"(s.base + CAST(ROUND(({c} - {W0}) * s.f) AS INTEGER))"
            return f"({c} + s.dt)"
        if mode == "tail":
            return f"({c} + {tail_dt})"
        return c

    for t in event_tables:
        kind, timecol = table_kind(t)
        cn = colnames[t]
        ct = q("c_" + t)
        replicate = t not in NO_REPLICATE and not any(pk for _, pk in tcols[t])
        nvtx_filter = ""
        if t == NVTX:
            nvtx_filter = " AND w.eventType IN (%s)" % ",".join(map(str, NVTX_REPLICATED_TYPES))
        target_cols = ",".join(q(c) for c in cn)

        def exprs(mode):
            out = []
            for c in cn:
                e = "w." + q(c)
                if c in ("start", "timestamp"):
                    e = tmap(c, mode)
                elif c == "end":
                    if mode == "prefix" and timecol:  # rows spanning the whole window get stretched
                        e = f'(CASE WHEN w."end" >= {W1} AND w.{q(timecol)} < {W0} THEN w."end" + {tail_dt} ELSE w."end" END)'
                    elif mode != "prefix":
                        e = tmap(c, mode)
                elif c == "correlationId":
                    e = {"copy": "(w.correlationId + s.dcorr)", "tail": f"(w.correlationId + {tail_corr})"}.get(mode, e)
                elif c == "gridId":
                    e = {"copy": "(w.gridId + s.dgrid)", "tail": f"(w.gridId + {tail_grid})"}.get(mode, e)
                elif c == "rangeId" and t == NVTX:
                    e = {"copy": "(w.rangeId + s.drange)", "tail": f"(w.rangeId + {tail_range})"}.get(mode, e)
                elif c == "text" and t == NVTX and mode == "copy":
                    e = (
                        f"(CASE WHEN i.rid IS NOT NULL AND w.text IS NOT NULL AND s.k > 0 "
                        f"THEN i.prefix || (i.num + s.k * {n_iters}) || i.suffix ELSE w.text END)"
                    )
                elif c == "textId" and t == NVTX and mode == "copy":
                    e = (
                        "(CASE WHEN i.rid IS NOT NULL AND w.text IS NULL AND i.inline = 0 AND s.k > 0 "
                        "THEN s.dstr + i.j ELSE w.textId END)"
                    )
                out.append(e)
            return ",".join(out)

        # prefix
        con.execute(
            f"INSERT INTO main.{q(t)} ({target_cols}) SELECT {exprs('prefix')} "
            f"FROM {ct} w WHERE w._cls = 0 ORDER BY w._rid"
        )
        # window copies
        ijoin = "LEFT JOIN iter i ON i.rid = w._rid" if t == NVTX else ""
        if replicate:
            con.execute(
                f"INSERT INTO main.{q(t)} ({target_cols}) SELECT {exprs('copy')} "
                f"FROM seq s CROSS JOIN {ct} w {ijoin} WHERE w._cls = 1{nvtx_filter} "
                f"ORDER BY s.k, w._rid"
            )
            if nvtx_filter:  # non-replicated NVTX types inside the window: keep once
                con.execute(
                    f"INSERT INTO main.{q(t)} ({target_cols}) SELECT {exprs('prefix')} "
                    f"FROM {ct} w WHERE w._cls = 1 AND NOT (1{nvtx_filter}) ORDER BY w._rid"
                )
        else:
            con.execute(
                f"INSERT INTO main.{q(t)} ({target_cols}) SELECT {exprs('prefix')} "
                f"FROM {ct} w WHERE w._cls = 1 ORDER BY w._rid"
            )
        # tail
        con.execute(
            f"INSERT INTO main.{q(t)} ({target_cols}) SELECT {exprs('tail')} "
            f"FROM {ct} w WHERE w._cls = 2 ORDER BY w._rid"
        )
        con.execute(f"DROP TABLE {ct}")

    # -------------------------------------------------- summary tables / rank
    if "ANALYSIS_DETAILS" in tables:
        con.execute(
            f"UPDATE main.ANALYSIS_DETAILS SET stopTime = stopTime + {tail_dt}, duration = duration + {tail_dt}"
        )
    if a.rank is not None and "TARGET_INFO_SYSTEM_ENV" in tables:
        env = "main.TARGET_INFO_SYSTEM_ENV"
        n = con.execute(f"UPDATE {env} SET value = ? WHERE name = 'RANK'", (str(a.rank),)).rowcount
        if n == 0:
            con.execute(
                f"INSERT INTO {env} (globalVid, devStateName, name, nameEnum, value) "
                f"SELECT globalVid, devStateName, 'RANK', {RANK_NAME_ENUM}, ? "
                f"FROM {env} ORDER BY rowid LIMIT 1",
                (str(a.rank),),
            )
            if con.execute(f"SELECT count(*) FROM {env} WHERE name='RANK'").fetchone()[0] == 0:
                con.execute(
                    f"INSERT INTO {env} VALUES (NULL, 'Local (CLI)', 'RANK', {RANK_NAME_ENUM}, ?)", (str(a.rank),)
                )
        for rowid, val in con.execute(f"SELECT rowid, value FROM {env} WHERE name = 'DeviceEnvironment'").fetchall():
            parts = [x for x in val.split(";") if x and not x.startswith("RANK=")]
            parts.append(f"RANK={a.rank}")
            con.execute(f"UPDATE {env} SET value = ? WHERE rowid = ?", (";".join(parts), rowid))

    # indexes from the source schema (after the bulk load)
    for t, n, sql in schema:
        if t != "table":
            con.execute(sql)
    con.execute("COMMIT")
    con.execute("DETACH DATABASE src")
    con.close()
    os.replace(tmp, a.out)
    elapsed = time.perf_counter() - t_start

    # ------------------------------------------------------------ report
    ro = sqlite3.connect("file:" + os.path.abspath(a.out) + "?mode=ro", uri=True)
    print(f"source         {a.src}")
    print(f"output         {a.out}")
    print(
        f"window         [{W0}, {W1}) ns  length {L} ns  ({n_iters} iterations "
        f"{win_its[0]['name']}..{win_its[-1]['name']}, gap {gap} ns, skipped {a.skip_iters})"
    )
    print(
        f"copies         {K}  (kernels/window {k_win}, prefix {k_pre}, tail {k_tail}; jitter {a.jitter}% seed {a.seed})"
    )
    print(
        f"id offsets     correlationId +k*{C}  gridId +k*{G}  rangeId +k*{R}  "
        f"new StringIds {n_textid_iters * (K - 1) if n_textid_iters else 0}"
    )
    print(f"time added     {tail_dt} ns")
    print("row counts:")
    for t in event_tables + [x for x in ("StringIds",) if x in tables]:
        n = ro.execute(f"SELECT count(*) FROM {q(t)}").fetchone()[0]
        print(f"  {t:40s} {n:>12,d}")
    if NVTX in tables:
        pat = win_its[0]["prefix"]
        n = ro.execute(
            f"SELECT count(*) FROM {NVTX} WHERE eventType IN (59,60) AND text GLOB ?", (pat + "[0-9]*",)
        ).fetchone()[0]
        print(f"  iteration ranges ({pat}*, inline)         {n:>12,d}")
    ro.close()
    size = os.path.getsize(a.out)
    print(f"file size      {size / 2**20:.1f} MiB ({size:,d} B, page size {page})")
    print(f"elapsed        {elapsed:.2f} s")


if __name__ == "__main__":
    main()
