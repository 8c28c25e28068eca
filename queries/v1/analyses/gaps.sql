-- GPU idle gaps on one device and what its process's CPU side was doing meanwhile.
-- A gap is a stretch of the device's active span (first op to last op) in which it ran no GPU op of any kind
-- on any stream (gpu_busy is already the union over kernels, memcpy, memset and graph replays). With $names
-- set, only the parts of gaps inside instances of those ranges (of process $pid) count.
-- $device, $pid: the device and the process that owns it (most GPU ops); $tid: that process's main thread
-- (its NVTX ranges enclose the most GPU work); $min_ns: shortest gap kept.
--
-- Cause, in this order of precedence:
--   1. `sync`, `memcpy`, `alloc` or `launch`: CUDA API calls of that kind (any thread of $pid) cover at least
--      half the gap (the kind with most coverage wins);
--   2. `host:<range>`: an NVTX range on the main thread covers at least half the gap; the deepest such range
--      names the cause (numbered names are shown as their family, Batch17 -> Batch*);
--   3. otherwise the API kind with most coverage, if any call overlaps the gap;
--   4. `unknown`.
-- API kinds by name: sync = *Synchronize*, *WaitEvent*, *EventQuery*, *StreamQuery*; memcpy = *Memcpy*;
-- alloc = *Malloc*, *Free*, *HostAlloc*, *HostRegister*, *MemAlloc*, *MemCreate*, *MemMap*; launch = *Launch*.
WITH busy AS (
  SELECT start_ns, end_ns FROM gpu_busy WHERE device_id = $device
), raw AS (
  SELECT lag(end_ns) OVER (ORDER BY start_ns) AS start_ns, start_ns AS end_ns FROM busy
), gaps AS (
  SELECT start_ns, end_ns FROM raw WHERE start_ns IS NOT NULL AND end_ns > start_ns
), windows AS (
  SELECT start_ns, end_ns FROM nvtx_ranges WHERE $names IS NOT NULL AND pid = $pid AND list_contains($names, name)
), clipped AS (
  SELECT greatest(g.start_ns, w.start_ns) AS start_ns, least(g.end_ns, w.end_ns) AS end_ns
  FROM gaps g JOIN windows w ON g.start_ns < w.end_ns AND g.end_ns > w.start_ns
  UNION ALL
  SELECT start_ns, end_ns FROM gaps WHERE $names IS NULL
), g AS (
  SELECT row_number() OVER (ORDER BY start_ns) AS gap_id, start_ns, end_ns, end_ns - start_ns AS duration_ns
  FROM clipped WHERE end_ns - start_ns >= $min_ns
), thread_ranges AS (
  SELECT range_id, name, depth, start_ns, end_ns FROM nvtx_ranges WHERE pid = $pid AND tid = $tid
), rng AS (
  SELECT g.gap_id, r.name, r.depth,
         least(r.end_ns, g.end_ns) - greatest(r.start_ns, g.start_ns) AS ov, g.duration_ns
  FROM g JOIN thread_ranges r ON r.start_ns < g.end_ns AND r.end_ns > g.start_ns
  QUALIFY row_number() OVER (PARTITION BY g.gap_id
                             ORDER BY (ov * 2 >= g.duration_ns) DESC,
                                      CASE WHEN ov * 2 >= g.duration_ns THEN r.depth ELSE 0 END DESC,
                                      ov DESC, r.start_ns DESC) = 1
), calls AS (
  SELECT a.start_ns, a.end_ns, s.value AS name,
         CASE WHEN s.value ILIKE '%synchronize%' OR s.value ILIKE '%waitevent%' OR s.value ILIKE '%eventquery%'
                   OR s.value ILIKE '%streamquery%' THEN 'sync'
              WHEN s.value ILIKE '%memcpy%' THEN 'memcpy'
              WHEN s.value ILIKE '%malloc%' OR s.value ILIKE '%free%' OR s.value ILIKE '%hostalloc%'
                   OR s.value ILIKE '%hostregister%' OR s.value ILIKE '%memalloc%' OR s.value ILIKE '%memcreate%'
                   OR s.value ILIKE '%memmap%' THEN 'alloc'
              WHEN s.value ILIKE '%launch%' THEN 'launch'
              ELSE 'other' END AS kind
  FROM api_calls a LEFT JOIN strings s ON s.id = a.name_id
  WHERE a.pid = $pid
), api AS (
  SELECT g.gap_id, c.kind, c.name,
         least(c.end_ns, g.end_ns) - greatest(c.start_ns, g.start_ns) AS ov
  FROM g JOIN calls c ON c.start_ns < g.end_ns AND c.end_ns > g.start_ns
), api_kind AS (
  SELECT gap_id, kind, sum(ov) AS cover FROM api WHERE kind <> 'other' GROUP BY gap_id, kind
  QUALIFY row_number() OVER (PARTITION BY gap_id ORDER BY cover DESC, kind) = 1
), api_top AS (
  SELECT gap_id, name, ov FROM api
  QUALIFY row_number() OVER (PARTITION BY gap_id ORDER BY ov DESC, name) = 1
), os AS (
  SELECT g.gap_id, s.value AS name, least(o.end_ns, g.end_ns) - greatest(o.start_ns, g.start_ns) AS ov
  FROM g
  JOIN (SELECT * FROM os_calls WHERE pid = $pid AND tid = $tid AND nesting_level = 0) o
    ON o.start_ns < g.end_ns AND o.end_ns > g.start_ns
  LEFT JOIN strings s ON s.id = o.name_id
  QUALIFY row_number() OVER (PARTITION BY g.gap_id ORDER BY ov DESC, s.value) = 1
)
SELECT
  $device::BIGINT AS device_id,
  $pid::BIGINT AS pid,
  g.start_ns,
  g.end_ns,
  g.duration_ns,
  CASE WHEN k.cover * 2 >= g.duration_ns THEN k.kind
       WHEN r.ov * 2 >= g.duration_ns THEN 'host:' || regexp_replace(r.name, '[ _#:-]*[0-9]+$', '')
                                           || CASE WHEN regexp_matches(r.name, '[0-9]$') THEN '*' ELSE '' END
       WHEN k.kind IS NOT NULL THEN k.kind
       ELSE 'unknown' END AS cause,
  -- innermost NVTX range open on the main thread during the gap
  r.name AS range,
  -- CUDA API call (any thread of the process) overlapping the gap the most
  t.name AS api_call,
  -- share of the gap covered by calls of the leading API kind, %
  round(100.0 * least(coalesce(k.cover, 0), g.duration_ns) / g.duration_ns, 1) AS api_cover_pct,
  -- OS runtime call on the main thread overlapping the gap the most (when traced with -t osrt)
  o.name AS os_call
FROM g
LEFT JOIN rng r USING (gap_id)
LEFT JOIN api_kind k USING (gap_id)
LEFT JOIN api_top t USING (gap_id)
LEFT JOIN os o USING (gap_id)
ORDER BY g.start_ns;
