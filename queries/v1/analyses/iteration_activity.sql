-- @tables gpu_metric_activity
-- @macros ops_by_iteration, overlaps_by_bucket
-- @param $ops VARCHAR: name of the table of every GPU op with its launch (launched_ops.sql, scratch.py)
-- @param $pid BIGINT: the process whose GPU ops count (any of its threads)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- SMs Active and Tensor Active per iteration (the columns `iterations` shows): iteration_metrics.sql's
-- time-weighted mean over each iteration's GPU-projected window, per device, read from gpu_metric_activity (the
-- samples of those two metrics only) rather than from every metric's samples. No row without samples.
WITH mine AS (
  SELECT device_id, start_ns, end_ns, api_start_ns FROM query_table($ops)
  WHERE pid = $pid AND EXISTS (SELECT 1 FROM gpu_metric_activity)  -- without samples, nothing to read
), ops AS (
  SELECT iteration, device_id, start_ns, end_ns FROM ops_by_iteration('mine', $windows)
), proj AS (
  SELECT iteration, device_id, min(start_ns) AS a, max(end_ns) AS b FROM ops GROUP BY ALL
), s AS (
  SELECT device_id, metric, unit, value, t0_ns AS t0, t1_ns AS t1 FROM gpu_metric_activity
)
-- each window against the sampling periods it overlaps (overlaps_by_bucket, canonical/00_macros.sql)
SELECT
  o.iteration, o.device_id, o.metric, o.unit,
  sum(o.value * o.overlap_ns) / sum(o.overlap_ns) AS mean
FROM overlaps_by_bucket('proj', 's') o
GROUP BY ALL
ORDER BY o.iteration, o.device_id, o.metric, o.unit;
