-- GPU metrics per NVTX range (domain, name, style), per device: the time-weighted mean of each metric over the
-- GPU-projected windows of its instances (first start to last end of the GPU ops it encloses, as ranges.sql
-- projects them), so a range that only enqueues work is judged by when that work ran. Each sample counts for
-- its sampling period (gpu_metric_samples.timestamp_ns) as far as it overlaps a window; instances weigh by
-- their sampled GPU-projected time. $attribution: 'thread' or 'process' (see canonical/60_op_ranges.sql).
WITH proj AS (
  SELECT x.range_id, o.device_id, min(o.start_ns) AS a, max(o.end_ns) AS b
  FROM op_ranges x JOIN gpu_ops o USING (op_id)
  WHERE x.via = 'thread' OR $attribution = 'process'
  GROUP BY ALL
), s AS (  -- each sample with the end of its period: the next sample, or one period on for the last
  SELECT device_id, metric, unit, value, timestamp_ns AS t0,
         coalesce(lead(timestamp_ns) OVER w, 2 * timestamp_ns - lag(timestamp_ns) OVER w) AS t1
  FROM gpu_metric_samples
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
  r.name AS range, r.domain, p.device_id, s.metric, s.unit,
  count(DISTINCT p.range_id) AS instances,
  sum(s.value * (least(s.t1, p.b) - greatest(s.t0, p.a))) / sum(least(s.t1, p.b) - greatest(s.t0, p.a)) AS mean
FROM pb p
JOIN nvtx_ranges r USING (range_id)
JOIN sb s ON s.device_id = p.device_id AND s.bucket = p.bucket
WHERE s.t0 < p.b AND s.t1 > p.a AND greatest(s.t0, p.a) // s.p = s.bucket
GROUP BY r.name, r.domain, r.style, p.device_id, s.metric, s.unit
ORDER BY r.domain, range, p.device_id, s.metric, s.unit;
