-- @tables gpu_metric_names, gpu_metric_values

-- GPU metrics over the whole capture, per device and metric (gpu_metric_samples, read as its two tables): the
-- same count, mean, min and max as `nsys recipe gpu_metric_util_sum` (plain statistics of the samples, not
-- time-weighted: the samples are evenly spaced), the median and 90th percentile, and a note on counters whose
-- values do not fit their unit. The rules of the notes (each rests on the values alone):
-- - a `Throughput %` counter with a value below 0 or above 100 is not a percentage;
-- - a `MHz` counter above 1,000,000 (1 THz, beyond any GPU clock) holds Hz;
-- - an `Avg` warps counter more than 1000 times its `Avg Warps per Cycle` sibling is a sum over the cycles
--   of each sample, not an average (the ratio of their sums is about the GPU cycles in one sampling period).
WITH k AS (  -- each metric (gpu_metric_names.key) with its device and name (gpu_metric_samples' join), and a
            -- number per (device, metric, unit): the samples are grouped by that number, not by its strings
  SELECT key, (type_id & 255)::INTEGER AS device_id, metric, unit,
         dense_rank() OVER (ORDER BY (type_id & 255), metric, unit) AS name_key
  FROM gpu_metric_names
), per AS (
  SELECT
    k.name_key,
    count(*) AS samples,
    avg(v.value) AS mean,
    min(v.value) AS min,
    quantile_cont(v.value, 0.5) AS p50,
    quantile_cont(v.value, 0.9) AS p90,
    max(v.value) AS max,
    sum(v.value) AS total
  FROM gpu_metric_values v
  JOIN k USING (key)
  GROUP BY k.name_key
), stats AS (
  SELECT n.device_id, n.metric, n.unit, per.* EXCLUDE (name_key)
  FROM per
  JOIN (SELECT DISTINCT name_key, device_id, metric, unit FROM k) n USING (name_key)
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
