-- @staging raw_gpu_activity, raw_gpu_metric_names
-- @defines gpu_metric_activity

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
), s AS (
  SELECT (m.typeId & 255)::INTEGER AS device_id, n.metric, n.unit, m.timestamp AS t0, m.value
  FROM raw_gpu_activity m
  JOIN names n ON n.typeId = m.typeId AND n.metricId = m.metricId
  WHERE m.timestamp >= 0
    AND n.metric IN ('SMs Active', 'SM Active', 'Tensor Active', 'Tensor Active / FP16 Active')
    AND (n.unit IS NULL OR contains(n.unit, '%'))
)
SELECT
  -- CUDA device id the sample was taken on, as in gpu_metric_samples.device_id
  device_id,
  -- the metric's name, as in gpu_metric_samples.metric: `SMs Active`, `SM Active`, `Tensor Active` or
  -- `Tensor Active / FP16 Active`
  metric,
  -- its unit, as in gpu_metric_samples.unit (`Throughput %`, or NULL)
  unit,
  -- the sampling period the sample describes: from its timestamp (gpu_metric_samples.timestamp_ns), ns
  t0 AS t0_ns,
  -- to the device's next sample of the metric, or one period on (as long as the one before) for the last;
  -- NULL for a metric sampled once, ns
  coalesce(lead(t0) OVER w, 2 * t0 - lag(t0) OVER w) AS t1_ns,
  -- the sampled value, %
  value
FROM s
WINDOW w AS (PARTITION BY device_id, metric, unit ORDER BY t0);
