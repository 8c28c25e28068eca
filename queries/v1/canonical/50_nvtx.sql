-- @include 00_macros.sql
-- @staging raw_nvtx, raw_strings
-- @macros global_pid, global_tid, is_interval
-- @defines nvtx_marks, nvtx_open, nvtx_ranges
-- @empty_without raw_nvtx

-- nsysql canonical schema v1: NVTX ranges and marks.
-- Names resolve as COALESCE(text, StringIds[textId]); domains come from the NvtxDomainCreate events
-- (eventType 75) of the same process; the default domain is the empty string, shown as `:name` by nsys.

CREATE OR REPLACE TEMP TABLE _nvtx AS
SELECT
  n.*,
  global_pid(n.globalTid) AS pid,
  global_tid(n.globalTid) AS tid,
  coalesce(n.text, s.value) AS label
FROM raw_nvtx n
LEFT JOIN raw_strings s ON s.id = n.textId;

CREATE OR REPLACE TEMP TABLE _domains AS
SELECT pid, domainId, any_value(label) AS domain
FROM _nvtx WHERE eventType = 75 AND domainId IS NOT NULL
GROUP BY 1, 2;

CREATE OR REPLACE TEMP TABLE _ranges AS
SELECT
  row_number() OVER (ORDER BY n.start, n.pid, n.tid, n."end" DESC) AS range_id,
  n.pid, n.tid,
  CASE WHEN n.endGlobalTid IS NOT NULL AND n.endGlobalTid <> 0 THEN global_tid(n.endGlobalTid) ELSE n.tid END AS end_tid,
  n.start AS start_ns, n."end" AS end_ns,
  coalesce(n.label, '') AS name,
  coalesce(d.domain, '') AS domain,
  CASE n.eventType WHEN 59 THEN 'PushPop' ELSE 'StartEnd' END AS style,
  n.category
FROM _nvtx n
LEFT JOIN _domains d ON d.pid = n.pid AND d.domainId = n.domainId
WHERE n.eventType IN (59, 60) AND is_interval(n.start, n."end");

-- Depth of push/pop ranges on their thread: a sweep over start (+1) and end (-1) events, ends before starts
-- at the same instant, enclosing ranges (longer) before enclosed ones that start at the same instant.
CREATE OR REPLACE TEMP TABLE _pp_depth AS
WITH ev AS (
  SELECT range_id, pid, tid, start_ns AS ts, 1 AS ord, -end_ns AS ord2, 1 AS delta FROM _ranges WHERE style = 'PushPop'
  UNION ALL
  SELECT NULL, pid, tid, end_ns, 0, 0, -1 FROM _ranges WHERE style = 'PushPop'
), run AS (
  SELECT range_id, pid, tid, ts,
         sum(delta) OVER (PARTITION BY pid, tid ORDER BY ts, ord, ord2, range_id
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - 1 AS depth
  FROM ev
)
SELECT range_id, greatest(depth, 0)::BIGINT AS depth FROM run WHERE range_id IS NOT NULL;  -- not HUGEINT (a sum)

CREATE OR REPLACE TEMP TABLE _pp AS
SELECT r.range_id, r.pid, r.tid, r.start_ns, r.end_ns, d.depth
FROM _ranges r JOIN _pp_depth d USING (range_id);

-- Parent: the latest range one level up on the same thread that started no later (ASOF), if it encloses.
CREATE OR REPLACE TEMP TABLE _pp_parent AS
SELECT c.range_id, CASE WHEN p.end_ns >= c.end_ns THEN p.range_id END AS parent_id
FROM _pp c
ASOF LEFT JOIN _pp p
  ON c.pid = p.pid AND c.tid = p.tid AND c.depth - 1 = p.depth AND c.start_ns >= p.start_ns
WHERE c.depth > 0;

-- One row per NVTX range (push/pop or start/end) that was closed before the capture ended.
CREATE OR REPLACE TABLE nvtx_ranges AS
SELECT
  -- row number in start order, stable for this load
  r.range_id,
  -- process id
  r.pid,
  -- thread that opened the range
  r.tid,
  -- thread that closed it: differs from tid for start/end ranges ended on another thread (nsys drops those;
  -- nsysql keeps them)
  r.end_tid,
  -- start, ns on the export's clock
  r.start_ns,
  -- end, ns
  r.end_ns,
  -- end_ns - start_ns: the CPU-side (wall) time of the range
  r.end_ns - r.start_ns AS duration_ns,
  -- range text, e.g. `Forward Pass`, `Batch12`
  r.name,
  -- NVTX domain name; '' for the default domain
  r.domain,
  -- `PushPop` (nvtxRangePush/Pop, nested per thread) or `StartEnd` (nvtxRangeStart/End, may cross threads)
  r.style,
  -- nesting depth among the push/pop ranges of its thread (0 = outermost); 0 for start/end ranges
  coalesce(d.depth, 0) AS depth,
  -- range_id of the enclosing push/pop range on the same thread; NULL at depth 0 and for start/end ranges
  p.parent_id,
  -- NVTX category id, NULL when none
  r.category
FROM _ranges r
LEFT JOIN _pp_depth d USING (range_id)
LEFT JOIN _pp_parent p USING (range_id)
ORDER BY r.range_id;

-- One row per NVTX mark (nvtxMark, an instant).
CREATE OR REPLACE TABLE nvtx_marks AS
SELECT
  -- process id
  n.pid,
  -- thread id
  n.tid,
  -- time, ns
  n.start AS ts_ns,
  -- mark text
  coalesce(n.label, '') AS name,
  -- NVTX domain name; '' for the default domain
  coalesce(d.domain, '') AS domain
FROM _nvtx n
LEFT JOIN _domains d ON d.pid = n.pid AND d.domainId = n.domainId
WHERE n.eventType = 34;

-- The innermost push/pop range open on each thread, as a step function of time: from ts_ns until the thread's
-- next row, `range_id` is open and innermost (NULL: none open). Look a time up with an ASOF join on
-- (pid, tid, ts_ns <= t).
CREATE OR REPLACE TABLE nvtx_open AS
WITH ev AS (
  SELECT pid, tid, start_ns AS ts, 1 AS ord, -end_ns AS ord2, range_id AS ord3, range_id AS state
  FROM nvtx_ranges WHERE style = 'PushPop'
  UNION ALL
  SELECT pid, tid, end_ns, 0, -depth, range_id, parent_id
  FROM nvtx_ranges WHERE style = 'PushPop'
)
SELECT
  -- process id
  pid,
  -- thread id
  tid,
  -- from this time on (ns)
  ts AS ts_ns,
  -- nvtx_ranges.range_id of the innermost open push/pop range; NULL when none is open
  state AS range_id
FROM ev
QUALIFY row_number() OVER (PARTITION BY pid, tid, ts ORDER BY ord DESC, ord2 DESC, ord3 DESC) = 1
ORDER BY pid, tid, ts_ns;
