-- @staging raw_gpu_activity, raw_gpu_metric_names
-- @defines gpu_activity_names, gpu_activity_periods, gpu_metric_activity
-- @empty_without raw_gpu_activity
-- @empty_without raw_gpu_metric_names

-- nsysql canonical schema v1: the GPU metrics samples nsysql's own answers read (SMs Active, Tensor Active).

-- The two metrics' names on each device: SMs Active (`SM Active` in some nsys versions) and Tensor Active
-- (Turing: `Tensor Active / FP16 Active`) in a percent unit, one of each kind per device (nsys names one; were
-- there several, the first by name and unit). Empty when the export did not sample them.
CREATE OR REPLACE TABLE gpu_activity_names AS
WITH names AS MATERIALIZED (  -- each name split once per metric (not per sample), as in gpu_metric_names
  SELECT typeId, metricId,
         regexp_replace(metricName, '\s*\[[^\]]*\]\s*$', '') AS metric,
         nullif(regexp_extract(metricName, '\[([^\]]*)\]\s*$', 1), '') AS unit
  FROM (SELECT DISTINCT typeId, metricId, metricName FROM raw_gpu_metric_names)
)
SELECT
  -- CUDA device id, as in gpu_metric_samples.device_id
  (typeId & 255)::INTEGER AS device_id,
  -- whether the metric is Tensor Active (else SMs Active)
  starts_with(metric, 'Tensor') AS tensor,
  -- the metric's name, as in gpu_metric_samples.metric: `SMs Active`, `SM Active`, `Tensor Active` or
  -- `Tensor Active / FP16 Active`
  first(metric ORDER BY metric, unit NULLS LAST) AS metric,
  -- its unit, as in gpu_metric_samples.unit (`Throughput %`, or NULL)
  first(unit ORDER BY metric, unit NULLS LAST) AS unit
FROM names
WHERE metric IN ('SMs Active', 'SM Active', 'Tensor Active', 'Tensor Active / FP16 Active')
  AND (unit IS NULL OR contains(unit, '%'))
  AND EXISTS (SELECT 1 FROM raw_gpu_activity)  -- names without samples name nothing sampled
GROUP BY ALL;

-- One row per device and sampling time of those two metrics, both values in the row: read from the export apart
-- from the other metrics (a tenth of the rows), so that tensor-core use (kernel_tensor_use), iterations and the
-- report's timeline read no other metric, and aggregated once per sampling period as they are stored (half the
-- rows of one per sample, and one window over the device's times rather than one per metric). nsys samples every metric of a device at once (gpu_metric_periods),
-- so a period's end is the device's next sampling time, unless that comes more than half a period (the median
-- spacing of the device's samples) late: samples are missing there, and the one before the gap describes one
-- period (gpu_metric_periods' rule). Samples before the session's time origin (timestamp < 0) are left out, as
-- in gpu_metric_samples.
CREATE OR REPLACE TABLE gpu_activity_periods AS
WITH k AS (  -- the (type, metric id)s of the names above (each name split as there)
  SELECT DISTINCT m.typeId, m.metricId, a.tensor
  FROM (
    SELECT DISTINCT typeId, metricId,
           regexp_replace(metricName, '\s*\[[^\]]*\]\s*$', '') AS metric,
           nullif(regexp_extract(metricName, '\[([^\]]*)\]\s*$', 1), '') AS unit
    FROM raw_gpu_metric_names
  ) m
  JOIN gpu_activity_names a
    ON a.device_id = (m.typeId & 255)::INTEGER AND a.metric = m.metric AND a.unit IS NOT DISTINCT FROM m.unit
), s AS (
  SELECT (m.typeId & 255)::INTEGER AS device_id, m.timestamp AS t0,
         -- one sample per device, metric and time (nsys writes one; were there several, the largest)
         max(m.value) FILTER (WHERE NOT k.tensor) AS sm,
         max(m.value) FILTER (WHERE k.tensor) AS tensor
  FROM raw_gpu_activity m
  JOIN k ON k.typeId = m.typeId AND k.metricId = m.metricId
  WHERE m.timestamp >= 0
  GROUP BY ALL
), t AS (
  SELECT *, lead(t0) OVER w AS next_ns, lag(t0) OVER w AS prev_ns
  FROM s
  WINDOW w AS (PARTITION BY device_id ORDER BY t0)
), m AS (
  SELECT device_id, round(median(next_ns - t0))::BIGINT AS period_ns FROM t GROUP BY device_id
)
SELECT
  -- CUDA device id the samples were taken on, as in gpu_metric_samples.device_id
  device_id,
  -- the sampling period the samples describe: from their timestamp (gpu_metric_samples.timestamp_ns), ns
  t0 AS t0_ns,
  -- to the device's next sampling time, or one period on where that is more than half a period late and for
  -- the last (as long as the one before it, where that one was not late); NULL for a device sampled once, ns
  CASE WHEN next_ns - t0 <= 1.5 * period_ns THEN next_ns
       WHEN next_ns IS NULL AND t0 - prev_ns <= 1.5 * period_ns THEN 2 * t0 - prev_ns
       ELSE t0 + period_ns END AS t1_ns,
  -- SMs Active (gpu_activity_names), %; NULL where it was not sampled then
  sm AS sm_active,
  -- Tensor Active (gpu_activity_names), %; NULL where it was not sampled then
  tensor AS tensor_active
FROM t JOIN m USING (device_id);

-- One row per sample of SMs Active and Tensor Active (gpu_activity_names), with the sampling period it describes
-- (gpu_activity_periods): the rows of gpu_metric_samples with those metrics, each with its period. A view over
-- gpu_activity_periods, which nsysql's own readers read.
CREATE OR REPLACE VIEW gpu_metric_activity AS
SELECT
  -- CUDA device id the sample was taken on, as in gpu_metric_samples.device_id
  p.device_id,
  -- the metric's name, as in gpu_metric_samples.metric: `SMs Active`, `SM Active`, `Tensor Active` or
  -- `Tensor Active / FP16 Active`
  n.metric,
  -- its unit, as in gpu_metric_samples.unit (`Throughput %`, or NULL)
  n.unit,
  -- the sampling period the sample describes: from its timestamp (gpu_metric_samples.timestamp_ns), ns
  p.t0_ns,
  -- to the device's next sampling time, or one period on (as long as the one before) for the last; NULL for a
  -- device sampled once, ns
  p.t1_ns,
  -- the sampled value, %
  CASE WHEN n.tensor THEN p.tensor_active ELSE p.sm_active END AS value
FROM gpu_activity_periods p
JOIN gpu_activity_names n USING (device_id)
WHERE CASE WHEN n.tensor THEN p.tensor_active ELSE p.sm_active END IS NOT NULL;
