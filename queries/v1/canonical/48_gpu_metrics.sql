-- @staging raw_gpu_metric_names, raw_gpu_metrics
-- @defines gpu_metric_samples, metric_periods

-- nsysql canonical schema v1: GPU metrics samples (`nsys profile --gpu-metrics-devices=...`).

-- One row per sample and metric: GPU_METRICS with the metric's name from TARGET_INFO_GPU_METRICS, joined on
-- (typeId, metricId): metric ids are not stable across nsys versions, names are. Empty when the export did not
-- sample GPU metrics (the tables are then absent and nothing is read).
-- The device is the low 8 bits of typeId: nsys's own recipes lay a GPU metrics typeId out as
-- <Hardware ID:8><VM ID:8><Source ID:16><Event tag:24><GPU ID:8> (nsys_recipe/lib/data_utils.py,
-- add_cols_from_type_id) and join that GPU ID with the kernels' deviceId (gpu_metric_util_sum --per-kernel).
-- Samples before the session's time origin (timestamp < 0: the first sample of a capture range) are left out,
-- as nsys's recipes leave them out.
CREATE OR REPLACE TABLE gpu_metric_samples AS
WITH names AS (
  SELECT DISTINCT typeId, metricId, metricName FROM raw_gpu_metric_names
)
SELECT
  -- CUDA device id the sample was taken on, as in gpu_ops.device_id (typeId & 0xFF, see above)
  (m.typeId & 255)::INTEGER AS device_id,
  -- metric name without its bracketed unit, e.g. `SMs Active`, `Tensor Active`, `DRAM Read Bandwidth`
  regexp_replace(n.metricName, '\s*\[[^\]]*\]\s*$', '') AS metric,
  -- the bracketed unit of nsys's name, e.g. `Throughput %`, `MHz`, `Avg`, `Avg Warps per Cycle`; NULL when
  -- the name has none. As nsys labels it: see `nsysql metrics` for the counters whose values do not fit it
  nullif(regexp_extract(n.metricName, '\[([^\]]*)\]\s*$', 1), '') AS unit,
  -- when the sample was taken, ns (the export's clock). A sample describes the sampling period that starts
  -- here, up to the device's next sample of the metric: its GR Active follows the kernels that ran after its
  -- timestamp, not before (checked against the kernels of fixtures/hw_mix)
  m.timestamp AS timestamp_ns,
  -- the sampled value, as nsys wrote it
  m.value
FROM raw_gpu_metrics m
JOIN names n ON n.typeId = m.typeId AND n.metricId = m.metricId
-- no ORDER BY: nsys writes GPU_METRICS in time order, and sorting millions of samples would cost the load more
-- than the readers' windows (which sort by partition) gain
WHERE m.timestamp >= 0;

-- Each sample of the metrics `names` (NULL: all) with the sampling period it describes, [t0, t1): from its
-- timestamp to the device's next sample of the same metric, or one period on for the last. The readers that
-- weigh samples by time (49_kernel_tensor_use.sql, analyses/iteration_metrics.sql, range_metrics.sql) take
-- their periods here and meet them with windows through overlaps_by_bucket (00_macros.sql).
CREATE OR REPLACE MACRO metric_periods(
  -- VARCHAR[]: metric names as in gpu_metric_samples.metric; NULL for every metric
  names
)
-- device_id, metric, unit, value as in gpu_metric_samples; t0, t1: the period, ns
AS TABLE
SELECT device_id, metric, unit, value, timestamp_ns AS t0,
       coalesce(lead(timestamp_ns) OVER w, 2 * timestamp_ns - lag(timestamp_ns) OVER w) AS t1
FROM gpu_metric_samples
WHERE names IS NULL OR list_contains(names, metric)
WINDOW w AS (PARTITION BY device_id, metric, unit ORDER BY timestamp_ns);
