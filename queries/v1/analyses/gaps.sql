-- @tables api_calls, gpu_busy, nvtx_open, nvtx_ranges, os_calls, strings
-- @macros range_family_label
-- @param $device INTEGER: the device (gpu_ops.device_id)
-- @param $min_ns BIGINT: the shortest gap kept, ns
-- @param $names VARCHAR[]: only the parts of gaps inside instances of these ranges count; NULL: all
-- @param $pid BIGINT: the process that owns $device (most GPU ops)
-- @param $tid BIGINT: the thread whose ranges explain a gap: the main thread, or with $names the one holding them

-- GPU idle gaps on one device and what its process's CPU side was doing meanwhile.
-- A gap is a stretch of the device's active span (first op to last op) in which it ran no GPU op of any kind
-- on any stream (gpu_busy is already the union over kernels, memcpy, memset and graph replays). With $names
-- set, only the parts of gaps inside instances of those ranges (of process $pid) count.
-- $device, $pid: the device and the process that owns it (most GPU ops); $tid: that process's main thread
-- (its NVTX ranges enclose the most GPU work), or with $names the thread that holds most instances of those
-- ranges (gaps.range_threads: a worker thread's `worker0/iter` is explained by that worker's ranges, not by
-- what the main thread had open); $min_ns: shortest gap kept.
--
-- Evidence, read at the gap:
--   range    the innermost NVTX range open on thread $tid at the middle of the gap (its parent instead,
--            when the innermost one covers less than half the gap and the parent covers more)
--   api_call the longest CUDA API call of the process (any thread) in flight at the middle of the gap
--   os_call  the OS runtime call in flight on thread $tid at the middle of the gap (-t osrt)
--   api_cover_pct  the share of the gap covered by CUDA API calls of the leading kind: the length of the
--            union of their intervals, so a stretch in which two threads were in such calls counts once
-- API kinds by name: sync = *Synchronize*, *WaitEvent*, *EventQuery*, *StreamQuery*; memcpy = *Memcpy*;
-- alloc = *Malloc*, *Free*, *HostAlloc*, *HostRegister*, *MemAlloc*, *MemCreate*, *MemMap*; load = *ModuleLoad*,
-- *LibraryLoad*, *ModuleUnload*, *LibraryUnload* (loading GPU code: CUDA's lazy loading does it at a kernel's
-- first launch, a JIT at each new kernel); launch = *Launch*.
--
-- Cause, in this order of precedence:
--   1. `sync`, `memcpy`, `alloc`, `load` or `launch`: calls of that kind cover at least half the gap (the kind with
--      most coverage wins);
--   2. `host:<range>`: the range above covers at least half the gap (shown as range_family_label: numbered
--      names as their family, Batch17 -> Batch*; PyTorch's operator calls as their operator,
--      `aten::conv2d, seq = 12, op_id = 1479, ...` -> aten::conv2d; a range without a name, NULL or blank, as
--      `host:(unnamed range)`, as nsysql.analyses._names.UNNAMED says it in sentences, never a bare `host:`; a
--      range really named so, in as many backticks each side, in one more pair, as _names.titled titles it);
--   3. otherwise the API kind with most coverage, if its calls cover at least a fifth of the gap (a call that
--      only touches a gap's edge, a cudaMalloc in the last millisecond of a 178 ms gap, explains nothing);
--   4. `unknown`.
WITH gaps AS (  -- the device's idle stretches: from the end of one busy stretch to the start of the next
  SELECT prev_end_ns AS start_ns, start_ns AS end_ns FROM gpu_busy
  WHERE device_id = $device AND prev_end_ns IS NOT NULL AND start_ns > prev_end_ns
), instances AS (
  SELECT start_ns, end_ns FROM nvtx_ranges WHERE $names IS NOT NULL AND pid = $pid AND list_contains($names, name)
), windows AS (
  -- the union of the instances: where they overlap (a pattern that names a range and the ranges nested in it,
  -- `Batch*` and `Load data`) they make one window, so each idle stretch is counted once, inside the outermost;
  -- instances that only touch stay apart (a gap across two adjacent steps is split between them, as before)
  SELECT min(start_ns) AS start_ns, max(end_ns) AS end_ns
  FROM (SELECT *, sum(CASE WHEN start_ns < reach THEN 0 ELSE 1 END) OVER (ORDER BY start_ns, end_ns
                      ROWS UNBOUNDED PRECEDING) AS island
        FROM (SELECT *, max(end_ns) OVER (ORDER BY start_ns, end_ns
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
              FROM instances))
  GROUP BY island
), clipped AS (
  -- the parts of gaps inside (disjoint) windows: each part starts either at a window start inside a gap, or
  -- at a gap start inside a window
  SELECT w.start_ns, least(g.end_ns, w.end_ns) AS end_ns
  FROM windows w ASOF JOIN gaps g ON w.start_ns >= g.start_ns
  WHERE g.end_ns > w.start_ns
  UNION
  SELECT g.start_ns, least(g.end_ns, w.end_ns)
  FROM gaps g ASOF JOIN windows w ON g.start_ns >= w.start_ns
  WHERE w.end_ns > g.start_ns
  UNION ALL
  SELECT start_ns, end_ns FROM gaps WHERE $names IS NULL
), g AS (
  SELECT row_number() OVER (ORDER BY start_ns) AS gap_id, start_ns, end_ns, end_ns - start_ns AS duration_ns,
         (start_ns + end_ns) // 2 AS mid_ns
  FROM clipped WHERE end_ns - start_ns >= $min_ns
), open_main AS (
  SELECT ts_ns, range_id FROM nvtx_open WHERE pid = $pid AND tid = $tid
), inner_rng AS (
  SELECT g.gap_id, r.range_id, r.name, r.parent_id,
         least(r.end_ns, g.end_ns) - greatest(r.start_ns, g.start_ns) AS ov
  FROM g ASOF JOIN open_main o ON g.mid_ns >= o.ts_ns
  JOIN nvtx_ranges r ON r.range_id = o.range_id
), rng AS (
  SELECT i.gap_id,
         CASE WHEN i.ov * 2 < g.duration_ns AND p.range_id IS NOT NULL THEN p.name ELSE i.name END AS name,
         CASE WHEN i.ov * 2 < g.duration_ns AND p.range_id IS NOT NULL
              THEN least(p.end_ns, g.end_ns) - greatest(p.start_ns, g.start_ns) ELSE i.ov END AS ov
  FROM inner_rng i JOIN g USING (gap_id) LEFT JOIN nvtx_ranges p ON p.range_id = i.parent_id
), call_kind AS (  -- classify each API name once, not each call; kinds as numbers keep the sorts cheap:
  -- 1 alloc, 2 launch, 3 load, 4 memcpy, 5 sync (alphabetical, as ties are broken by kind)
  SELECT id AS name_id,
         CASE WHEN value ILIKE '%synchronize%' OR value ILIKE '%waitevent%' OR value ILIKE '%eventquery%'
                   OR value ILIKE '%streamquery%' THEN 5
              WHEN value ILIKE '%memcpy%' THEN 4
              WHEN value ILIKE '%malloc%' OR value ILIKE '%free%' OR value ILIKE '%hostalloc%'
                   OR value ILIKE '%hostregister%' OR value ILIKE '%memalloc%' OR value ILIKE '%memcreate%'
                   OR value ILIKE '%memmap%' THEN 1
              WHEN value ILIKE '%moduleload%' OR value ILIKE '%libraryload%' OR value ILIKE '%moduleunload%'
                   OR value ILIKE '%libraryunload%' THEN 3
              WHEN value ILIKE '%launch%' THEN 2
              ELSE 0 END::UTINYINT AS kind
  FROM strings WHERE id IN (SELECT DISTINCT name_id FROM api_calls)
), calls AS (  -- the process's calls of a kind
  SELECT a.start_ns, a.end_ns, k.kind
  FROM api_calls a JOIN call_kind k USING (name_id)
  WHERE a.pid = $pid AND k.kind > 0
), stream AS (  -- the calls and the gaps' openings in time order (a gap before the calls that start with it).
  -- One sort, then one streaming pass (a window with an empty OVER clause keeps its input's order, DuckDB's
  -- order-preservation rules), instead of two ASOF joins that each sorted every call of the process (the
  -- same rows, less CPU). Calls of one kind
  -- that start together are taken in end order, so the latest of them is the one that runs longest
  SELECT * FROM (
    SELECT start_ns, end_ns, kind, NULL::BIGINT AS gap_id FROM calls
    UNION ALL
    SELECT start_ns, end_ns, 0::UTINYINT, gap_id FROM g)
  ORDER BY start_ns, kind, end_ns
), latest AS (  -- at each row: the latest gap opened so far, and per kind the end of the latest call started
  SELECT start_ns, end_ns, kind, gap_id,
         last_value(gap_id IGNORE NULLS) OVER w AS cur_gap,
         last_value(CASE WHEN kind = 0 THEN end_ns END IGNORE NULLS) OVER w AS cur_gap_end,
         last_value(CASE WHEN kind = 1 THEN end_ns END IGNORE NULLS) OVER w AS end1,
         last_value(CASE WHEN kind = 2 THEN end_ns END IGNORE NULLS) OVER w AS end2,
         last_value(CASE WHEN kind = 3 THEN end_ns END IGNORE NULLS) OVER w AS end3,
         last_value(CASE WHEN kind = 4 THEN end_ns END IGNORE NULLS) OVER w AS end4,
         last_value(CASE WHEN kind = 5 THEN end_ns END IGNORE NULLS) OVER w AS end5
  FROM stream WINDOW w AS (ROWS UNBOUNDED PRECEDING)
), near AS (  -- the gaps' openings and the calls that start inside a gap (few rows, in the same order), with per
  -- kind the latest end so far among the calls running when a gap opened (the opening row's end1..end5) and
  -- the calls started in gaps since: a running max, so each call below adds only its part past it
  SELECT *, lag([m1, m2, m3, m4, m5]) OVER () AS prev
  FROM (SELECT *,
               max(CASE kind WHEN 0 THEN end1 WHEN 1 THEN end_ns END) OVER w AS m1,
               max(CASE kind WHEN 0 THEN end2 WHEN 2 THEN end_ns END) OVER w AS m2,
               max(CASE kind WHEN 0 THEN end3 WHEN 3 THEN end_ns END) OVER w AS m3,
               max(CASE kind WHEN 0 THEN end4 WHEN 4 THEN end_ns END) OVER w AS m4,
               max(CASE kind WHEN 0 THEN end5 WHEN 5 THEN end_ns END) OVER w AS m5
        FROM latest WHERE start_ns < cur_gap_end WINDOW w AS (ROWS UNBOUNDED PRECEDING))
), in_gap AS (  -- calls starting inside a gap, clipped to it and to the part no call of their kind covered
  -- before: the parts add up to the length of the union, however many threads were in such calls at once
  SELECT gap_id, kind, least(end_ns, gap_end) - greatest(start_ns, coalesce(prev[kind], start_ns)) AS ov
  FROM (SELECT cur_gap AS gap_id, cur_gap_end AS gap_end, kind, start_ns, end_ns, prev FROM near WHERE kind > 0)
  WHERE least(end_ns, gap_end) > greatest(start_ns, coalesce(prev[kind], start_ns))
), spanning AS (  -- per kind, the last call started before the gap, if it is still running when the gap opens
  SELECT gap_id, kind, least(e, end_ns) - start_ns AS ov
  FROM (SELECT gap_id, start_ns, end_ns, unnest([end1, end2, end3, end4, end5]) AS e, unnest([1, 2, 3, 4, 5])::UTINYINT AS kind
        FROM latest WHERE kind = 0)
  WHERE e > start_ns
), api_kind AS (
  SELECT gap_id, kind, sum(ov) AS cover FROM (SELECT * FROM in_gap UNION ALL SELECT * FROM spanning)
  GROUP BY gap_id, kind
  QUALIFY row_number() OVER (PARTITION BY gap_id ORDER BY sum(ov) DESC, kind) = 1
), long_calls AS (  -- any named call of the process (call_kind has every name), of a kind or not
  SELECT start_ns, end_ns, name_id FROM api_calls
  WHERE pid = $pid AND end_ns - start_ns >= greatest($min_ns // 10, 10000)
    AND name_id IN (SELECT name_id FROM call_kind)
), api_top AS (
  SELECT g.gap_id, s.value AS name
  FROM g ASOF JOIN long_calls c ON g.mid_ns >= c.start_ns
  LEFT JOIN strings s ON s.id = c.name_id
  WHERE c.end_ns > g.mid_ns
), os AS (
  SELECT g.gap_id, s.value AS name
  FROM g ASOF JOIN (SELECT * FROM os_calls WHERE pid = $pid AND tid = $tid AND nesting_level = 0) o
    ON g.mid_ns >= o.start_ns
  LEFT JOIN strings s ON s.id = o.name_id
  WHERE o.end_ns > g.mid_ns
)
SELECT
  $device::BIGINT AS device_id,
  $pid::BIGINT AS pid,
  g.start_ns,
  g.end_ns,
  g.duration_ns,
  CASE WHEN k.cover * 2 >= g.duration_ns THEN ['alloc', 'launch', 'load', 'memcpy', 'sync'][k.kind]
       WHEN r.ov * 2 >= g.duration_ns
         THEN 'host:' || CASE WHEN r.label IS NULL THEN '(unnamed range)'
                              WHEN trim(r.label, '`') = '(unnamed range)'
                                   AND length(ltrim(r.label, '`')) = length(rtrim(r.label, '`'))
                                THEN '`' || r.label || '`'
                              ELSE r.label END
       WHEN k.cover * 5 >= g.duration_ns THEN ['alloc', 'launch', 'load', 'memcpy', 'sync'][k.kind]
       ELSE 'unknown' END AS cause,
  r.name AS range,
  t.name AS api_call,
  round(100.0 * least(coalesce(k.cover, 0), g.duration_ns) / g.duration_ns, 1) AS api_cover_pct,
  o.name AS os_call
FROM g
LEFT JOIN (SELECT *, nullif(trim(range_family_label(name)), '') AS label FROM rng) r USING (gap_id)
LEFT JOIN api_kind k USING (gap_id)
LEFT JOIN api_top t USING (gap_id)
LEFT JOIN os o USING (gap_id)
ORDER BY g.start_ns;
