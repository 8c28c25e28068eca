-- @tables gpu_activity_periods
-- @macros ops_by_iteration, overlaps_by_bucket
-- @param $ops VARCHAR: name of the table of every GPU op with its launch (launched_ops.sql, scratch.py)
-- @param $pid BIGINT: the process whose GPU ops count (any of its threads)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- SMs Active and Tensor Active per iteration (the columns `iterations` shows): iteration_metrics.sql's
-- time-weighted mean over each iteration's GPU-projected window, per device, read from gpu_activity_periods (the
-- samples of those two metrics only, both in one row per period) rather than from every metric's samples: each
-- mean over the periods that sampled its metric; NULL where none did. No row without samples.
WITH mine AS (
  SELECT device_id, start_ns, end_ns, api_start_ns FROM query_table($ops)
  WHERE pid = $pid AND EXISTS (SELECT 1 FROM gpu_activity_periods)  -- without samples, nothing to read
), ops AS (
  SELECT iteration, device_id, start_ns, end_ns FROM ops_by_iteration('mine', $windows)
), proj AS (
  SELECT iteration, device_id, min(start_ns) AS a, max(end_ns) AS b FROM ops GROUP BY ALL
), s AS (
  SELECT device_id, sm_active AS sm, tensor_active AS tensor, t0_ns AS t0, t1_ns AS t1 FROM gpu_activity_periods
)
-- each window against the sampling periods it overlaps (overlaps_by_bucket, canonical/00_macros.sql)
SELECT
  o.iteration, o.device_id,
  sum(o.sm * o.overlap_ns) / sum(o.overlap_ns) FILTER (WHERE o.sm IS NOT NULL) AS sm_active_pct,
  sum(o.tensor * o.overlap_ns) / sum(o.overlap_ns) FILTER (WHERE o.tensor IS NOT NULL) AS tensor_active_pct
FROM overlaps_by_bucket('proj', 's') o
GROUP BY ALL
ORDER BY o.iteration, o.device_id;
