-- @tables gpu_metric_names, gpu_metric_periods, gpu_metric_values
-- @macros exact_weighted_mean, metric_sums_by_window, ops_by_iteration, overlaps_by_bucket
-- @param $metrics VARCHAR[]: the metric names to read, NULL for all
-- @param $ops VARCHAR: name of the table of every GPU op with its launch (launched_ops.sql, scratch.py)
-- @param $pid BIGINT: the process whose GPU ops count (any of its threads)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- GPU metrics per iteration (rows of the table named $windows, made by iteration_windows.sql): the
-- time-weighted mean of each metric over the iteration's GPU-projected window, per device: from the first
-- start to the last end of the GPU ops launched in the iteration (by any thread of process $pid, as in
-- iterations.sql), so an iteration that only enqueues work is judged by when that work ran. Each sample counts
-- for its sampling period (gpu_metric_samples.timestamp_ns) as far as it overlaps the window; the mean is over
-- the sampled part of the window. $metrics: the metric names to read (NULL: all). An iteration whose window no
-- sample covers is one row with metric NULL.
WITH mine AS (
  SELECT device_id, start_ns, end_ns, api_start_ns FROM query_table($ops) WHERE pid = $pid
), ops AS (
  SELECT iteration, device_id, start_ns, end_ns FROM ops_by_iteration('mine', $windows)
), proj AS (
  SELECT iteration, device_id, min(start_ns) AS a, max(end_ns) AS b FROM ops GROUP BY ALL
), p AS (
  SELECT device_id, t0_ns AS t0, t1_ns AS t1 FROM gpu_metric_periods
), o AS (  -- each window against the sampling periods it overlaps (overlaps_by_bucket, canonical/00_macros.sql):
           -- once per period, then its samples of every metric (not once per sample)
  SELECT iteration, device_id, t0, overlap_ns FROM overlaps_by_bucket('proj', 'p')
), k AS (  -- the metrics read, with their device and name (gpu_metric_samples' join): the samples are summed per
           -- metric (gpu_metric_names.key), and the names joined to the sums rather than to every sample
  SELECT key, (type_id & 255)::INTEGER AS device_id, metric, unit
  FROM gpu_metric_names
  WHERE $metrics IS NULL OR list_contains($metrics, metric)
), sums AS (  -- per window and metric, the sums of its time-weighted mean (canonical/00_macros.sql)
  SELECT * FROM metric_sums_by_window('o', 'k', 'gpu_metric_values')
)
SELECT
  s.iteration, s.device_id, k.metric, k.unit,
  exact_weighted_mean(s.num_whole, s.num, s.whole, s.den) AS mean
FROM sums s
JOIN k USING (key)
GROUP BY ALL
UNION ALL
-- an iteration whose GPU work on a sampled device no sampling period overlaps (the sampling paused, a buffer
-- dropped): one row, metric, unit and mean NULL, so that its absence is said rather than unseen
SELECT j.iteration, j.device_id, NULL, NULL, NULL
FROM proj j
WHERE j.b > j.a
  AND j.device_id IN (SELECT device_id FROM k)
  AND NOT EXISTS (SELECT 1 FROM o WHERE o.iteration = j.iteration AND o.device_id = j.device_id)
ORDER BY 1, 2, 3 NULLS FIRST, 4;
