-- @tables gpu_ops, nvtx_ranges, op_launch
-- @macros op_launch_ns
-- @param $delimiter BOOLEAN[]: per family, whether it delimits (see iteration_windows.sql)
-- @param $depth BIGINT[]: per family, the depth
-- @param $names VARCHAR[][]: per family, its range names
-- @param $pid BIGINT[]: per family, the process (parallel lists, one entry per family)
-- @param $tid BIGINT[]: per family, the thread

-- Tests 1 and 3 of iterations.detect (work and coverage) for many candidate range families at once, as upper
-- bounds, so that the families that cannot pass them fail without their windows being built one by one.
-- Parallel lists $pid, $tid, $depth, $names, $delimiter: one entry per family, numbered i from 0.
-- The windows are those of iteration_windows.sql, except that a delimiter's last one runs to the end of the
-- thread's last range (it can run no further): so with_work and work_share are at least what the exact
-- windows give. Work as in iteration_evidence.sql; work_share is NULL where the process launched none.
WITH c AS (
  SELECT i, $pid[i + 1] AS pid, $tid[i + 1] AS tid, $depth[i + 1] AS depth, $names[i + 1] AS names,
         $delimiter[i + 1] AS delimiter
  FROM range(len($pid)) t(i)
), thread_end AS (
  SELECT r.pid, r.tid, max(r.end_ns) AS e
  FROM (SELECT DISTINCT pid, tid FROM c) k JOIN nvtx_ranges r ON r.pid = k.pid AND r.tid = k.tid
  WHERE r.style = 'PushPop' GROUP BY r.pid, r.tid
), inst AS (
  SELECT c.i, c.pid, c.delimiter, r.start_ns, r.end_ns, te.e AS thread_end_ns,
         lead(r.start_ns) OVER (PARTITION BY c.i ORDER BY r.start_ns, r.range_id) AS next_start_ns
  FROM c JOIN nvtx_ranges r ON r.pid = c.pid AND r.tid = c.tid AND r.depth = c.depth
  JOIN thread_end te ON te.pid = c.pid AND te.tid = c.tid
  WHERE r.style = 'PushPop' AND list_contains(c.names, r.name)
), win AS (
  SELECT i, pid, start_ns,
         CASE WHEN NOT delimiter THEN end_ns ELSE coalesce(next_start_ns, thread_end_ns) END AS end_ns
  FROM inst
), proc AS (
  SELECT pid, kind, duration_ns, op_launch_ns(api_start_ns, start_ns) AS t
  FROM gpu_ops LEFT JOIN op_launch USING (op_id) WHERE pid IN (SELECT pid FROM c)
), compute AS (
  SELECT pid, count(*) FILTER (WHERE kind IN ('kernel', 'graph')) > 0 AS has_compute FROM proc GROUP BY pid
), work AS (
  SELECT p.pid, p.t, p.duration_ns FROM proc p JOIN compute k USING (pid)
  WHERE p.kind IN ('kernel', 'graph') OR NOT k.has_compute
), cum AS (  -- the work launched at or before t (ops launched at one instant together): count and time
  SELECT pid, t, count(*) OVER w AS n, sum(duration_ns) OVER w AS ns
  FROM work WINDOW w AS (PARTITION BY pid ORDER BY t RANGE UNBOUNDED PRECEDING)
), edges AS (  -- the work launched before each window's start and before its end
  SELECT w.i, w.start_ns, coalesce(a.n, 0) AS n0, coalesce(a.ns, 0) AS ns0, coalesce(b.n, 0) AS n1,
         coalesce(b.ns, 0) AS ns1
  FROM win w
  ASOF LEFT JOIN cum a ON w.pid = a.pid AND w.start_ns > a.t
  ASOF LEFT JOIN cum b ON w.pid = b.pid AND w.end_ns > b.t
), total AS (
  SELECT pid, sum(duration_ns) AS ns FROM work GROUP BY pid
)
SELECT c.i,
       count(e.start_ns) AS iterations,
       count(*) FILTER (WHERE e.n1 > e.n0) AS with_work,
       (sum(e.ns1 - e.ns0) / nullif(any_value(t.ns), 0))::DOUBLE AS work_share
FROM c
LEFT JOIN edges e USING (i)
LEFT JOIN total t ON t.pid = c.pid
GROUP BY c.i
ORDER BY c.i;
