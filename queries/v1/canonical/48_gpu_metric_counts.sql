-- @staging raw_gpu_metric_counts
-- @defines gpu_metric_counts
-- @empty_without raw_gpu_metric_counts

-- nsysql canonical schema v1: how many GPU metrics samples the export holds, counted as it is read (SQLite
-- counts them: no sample is read), for what `info` says of them without building gpu_metric_samples.

-- One row where the export holds GPU metrics samples, none where it holds none: how many rows
-- gpu_metric_samples holds (the same samples: from the session's time origin on, of a metric that
-- TARGET_INFO_GPU_METRICS names).
CREATE OR REPLACE TABLE gpu_metric_counts AS
SELECT
  -- the samples in gpu_metric_samples
  sum("rows")::BIGINT AS samples
FROM raw_gpu_metric_counts
HAVING sum("rows") > 0;
