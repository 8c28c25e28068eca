-- @staging raw_gpu_activity, raw_gpu_metric_names
-- @defines gpu_metric_activity
-- @empty_without raw_gpu_activity
-- @empty_without raw_gpu_metric_names

-- nsysql canonical schema v1: the GPU metrics samples nsysql's own answers read (SMs Active, Tensor Active).

-- One row per sample of SMs Active (`SM Active` in some nsys versions) and Tensor Active (Turing: `Tensor Active
-- / FP16 Active`) in a percent unit, with the sampling period it describes: the rows of gpu_metric_samples with
-- those metrics, read from the export apart from the other metrics (a tenth of the rows), so that tensor-core
-- use (kernel_tensor_use), iterations and the report's timeline read no other metric. Empty when the export did
-- not sample GPU metrics. Samples before the session's time origin (timestamp < 0) are left out, as in
-- gpu_metric_samples.
CREATE OR REPLACE TABLE gpu_metric_activity AS
WITH names AS MATERIALIZED (  -- each name split once per metric (not per sample), as in gpu_metric_names
  SELECT typeId, metricId,
         regexp_replace(metricName, '\s*\[[^\]]*\]\s*$', '') AS metric,
         nullif(regexp_extract(metricName, '\[([^\]]*)\]\s*$', 1), '') AS unit
  FROM (SELECT DISTINCT typeId, metricId, metricName FROM raw_gpu_metric_names)
), k AS MATERIALIZED (  -- the two metrics' ids, each (metric, unit) numbered: the window below sorts by
                        -- that number rather than by the strings (0.12 against 0.20 s CPU on 0.7M samples)
  SELECT typeId, metricId, metric, unit, dense_rank() OVER (ORDER BY metric, unit) AS name_key
  FROM names
  WHERE metric IN ('SMs Active', 'SM Active', 'Tensor Active', 'Tensor Active / FP16 Active')
    AND (unit IS NULL OR contains(unit, '%'))
), s AS (
  SELECT (m.typeId & 255)::INTEGER AS device_id, k.name_key, m.timestamp AS t0, m.value
  FROM raw_gpu_activity m
  JOIN k ON k.typeId = m.typeId AND k.metricId = m.metricId
  WHERE m.timestamp >= 0
)
SELECT
  -- CUDA device id the sample was taken on, as in gpu_metric_samples.device_id
  s.device_id,
  -- the metric's name, as in gpu_metric_samples.metric: `SMs Active`, `SM Active`, `Tensor Active` or
  -- `Tensor Active / FP16 Active`
  n.metric,
  -- its unit, as in gpu_metric_samples.unit (`Throughput %`, or NULL)
  n.unit,
  -- the sampling period the sample describes: from its timestamp (gpu_metric_samples.timestamp_ns), ns
  s.t0 AS t0_ns,
  -- to the device's next sample of the metric, or one period on (as long as the one before) for the last;
  -- NULL for a metric sampled once, ns
  coalesce(lead(s.t0) OVER w, 2 * s.t0 - lag(s.t0) OVER w) AS t1_ns,
  -- the sampled value, %
  s.value
FROM s
JOIN (SELECT DISTINCT name_key, metric, unit FROM k) n USING (name_key)
WINDOW w AS (PARTITION BY s.device_id, s.name_key ORDER BY s.t0);
