-- @tables gpu_metric_samples

-- GPU metrics over the whole capture, per device and metric (gpu_metric_samples): the same count, mean, min
-- and max as `nsys recipe gpu_metric_util_sum` (plain statistics of the samples, not time-weighted: the samples
-- are evenly spaced), the median and 90th percentile, and a note on counters whose values do not fit their
-- unit. The rules of the notes (each rests on the values alone):
-- - a `Throughput %` counter with a value below 0 or above 100 is not a percentage;
-- - a `MHz` counter above 1,000,000 (1 THz, beyond any GPU clock) holds Hz;
-- - an `Avg` warps counter more than 1000 times its `Avg Warps per Cycle` sibling is a sum over the cycles
--   of each sample, not an average (the ratio of their sums is about the GPU cycles in one sampling period).
WITH stats AS (
  SELECT
    device_id, metric, unit,
    count(*) AS samples,
    avg(value) AS mean,
    min(value) AS min,
    quantile_cont(value, 0.5) AS p50,
    quantile_cont(value, 0.9) AS p90,
    max(value) AS max,
    sum(value) AS total
  FROM gpu_metric_samples
  GROUP BY ALL
)
SELECT
  s.device_id, s.metric, s.unit, s.samples, s.mean, s.min, s.p50, s.p90, s.max,
  CASE
    WHEN contains(s.unit, '%') AND (s.min < 0 OR s.max > 100)
      THEN 'values outside 0-100: not a percentage'
    WHEN s.unit = 'MHz' AND s.max > 1e6
      THEN 'values are in Hz, not MHz: as MHz they would exceed 1 THz'
    WHEN s.unit = 'Avg' AND c.max > 0 AND s.max > 1000 * c.max
      THEN 'a sum over each sample''s cycles, not a per-cycle average (' || round(s.total / c.total)::BIGINT
           || ' x [Avg Warps per Cycle]): read that one'
  END AS note
FROM stats s
LEFT JOIN stats c
  ON c.device_id = s.device_id AND c.metric = s.metric AND c.unit = 'Avg Warps per Cycle' AND s.unit = 'Avg'
ORDER BY s.device_id, s.metric, s.unit;
