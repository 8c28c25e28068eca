-- GPU metrics per iteration (rows of the table named $windows, made by iteration_windows.sql): the
-- time-weighted mean of each metric over the iteration's GPU-projected window, per device: from the first
-- start to the last end of the GPU ops launched in the iteration (by any thread of process $pid, as in
-- iterations.sql), so an iteration that only enqueues work is judged by when that work ran. Each sample counts
-- for its sampling period (gpu_metric_samples.timestamp_ns) as far as it overlaps the window; the mean is over
-- the sampled part of the window. $metrics: the metric names to read (NULL: all).
WITH ops AS (
  SELECT i.iteration, o.device_id, o.start_ns, o.end_ns
  FROM (SELECT *, coalesce(api_start_ns, start_ns) AS t FROM gpu_ops WHERE pid = $pid) o
  ASOF JOIN query_table($windows) i ON o.t >= i.start_ns
  WHERE o.t < i.end_ns
), proj AS (
  SELECT iteration, device_id, min(start_ns) AS a, max(end_ns) AS b FROM ops GROUP BY ALL
), s AS (  -- each sample with the end of its period: the next sample, or one period on for the last
  SELECT device_id, metric, unit, value, timestamp_ns AS t0,
         coalesce(lead(timestamp_ns) OVER w, 2 * timestamp_ns - lag(timestamp_ns) OVER w) AS t1
  FROM gpu_metric_samples
  WHERE $metrics IS NULL OR list_contains($metrics, metric)
  WINDOW w AS (PARTITION BY device_id, metric, unit ORDER BY timestamp_ns)
), period AS (  -- per device, a bucket width: the median sampling period
  SELECT device_id, greatest(1, median(t1 - t0))::BIGINT AS p FROM s GROUP BY device_id
), sb AS (  -- each sample in every bucket its period touches (one or two)
  SELECT s.*, unnest(range(s.t0 // q.p, (s.t1 - 1) // q.p + 1)) AS bucket, q.p
  FROM s JOIN period q USING (device_id)
  WHERE s.t1 > s.t0
), pb AS (  -- each window in every bucket it spans
  SELECT proj.*, unnest(range(proj.a // q.p, (proj.b - 1) // q.p + 1)) AS bucket
  FROM proj JOIN period q USING (device_id)
  WHERE proj.b > proj.a
)
-- an equi-join on (device, bucket), not a range join of every window with every sample (the same rule as
-- canonical/49_kernel_tensor_use.sql): a pair that overlaps counts once, in the bucket where its overlap begins
SELECT
  p.iteration, p.device_id, s.metric, s.unit,
  sum(s.value * (least(s.t1, p.b) - greatest(s.t0, p.a))) / sum(least(s.t1, p.b) - greatest(s.t0, p.a)) AS mean
FROM pb p
JOIN sb s ON s.device_id = p.device_id AND s.bucket = p.bucket
WHERE s.t0 < p.b AND s.t1 > p.a AND greatest(s.t0, p.a) // s.p = s.bucket
GROUP BY ALL
ORDER BY p.iteration, p.device_id, s.metric, s.unit;
