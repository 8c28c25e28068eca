-- @staging raw_gpu_metric_counts, raw_gpu_metric_names
-- @defines gpu_metric_counts
-- @empty_without raw_gpu_metric_counts
-- @empty_without raw_gpu_metric_names

-- nsysql canonical schema v1: how many GPU metrics samples the export holds, counted as it is read (SQLite
-- counts them: no sample is read), for what `info` says of them without building gpu_metric_samples.

-- One row per metric of each GPU metrics event type that has samples: the rows gpu_metric_samples holds of it
-- (the same samples: after the session's time origin, of a metric TARGET_INFO_GPU_METRICS names). Empty exactly
-- when gpu_metric_samples is.
CREATE OR REPLACE TABLE gpu_metric_counts AS
SELECT
  -- as gpu_metric_names.type_id
  c.typeId AS type_id,
  -- as gpu_metric_names.metric_id
  c.metricId AS metric_id,
  -- the samples of this metric in gpu_metric_samples
  sum(c."rows")::BIGINT AS samples
FROM raw_gpu_metric_counts c
SEMI JOIN (SELECT DISTINCT typeId, metricId FROM raw_gpu_metric_names) n
  ON n.typeId = c.typeId AND n.metricId = c.metricId
GROUP BY c.typeId, c.metricId;
