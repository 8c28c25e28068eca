-- @staging raw_gpu_metric_names, raw_gpu_metrics
-- @defines gpu_metric_names, gpu_metric_periods, gpu_metric_samples, gpu_metric_values, metric_periods
-- @empty_without raw_gpu_metric_names

-- nsysql canonical schema v1: GPU metrics samples (`nsys profile --gpu-metrics-devices=...`).

-- The metrics sampled, one row per metric of each GPU metrics event type: TARGET_INFO_GPU_METRICS, each name
-- split into the metric and its unit once (not once per sample).
CREATE OR REPLACE TABLE gpu_metric_names AS
SELECT
  -- a number per (type_id, metric_id), how gpu_metric_values names the metric of a sample: its device
  -- (device_id below) times 2^23 plus the metric's number on the device, 1 up in (type_id, metric_id) order, so
  -- that `key >> 23` is a sample's device without a join. An INTEGER: devices 0-255 and up to 2^23 - 1 metrics
  -- per device fit it (a device with more fails the load, never two metrics one key), and millions of samples
  -- are written for less than with a BIGINT (figures in the commit that made it so)
  CASE WHEN dense_rank() OVER (PARTITION BY typeId & 255 ORDER BY typeId, metricId) < 8388608
       THEN (((typeId & 255) << 23) + dense_rank() OVER (PARTITION BY typeId & 255 ORDER BY typeId, metricId))::INTEGER
       ELSE error('gpu_metric_names: more than 8,388,607 GPU metrics on one device')
  END AS key,
  -- nsys's event type of the samples (GPU_METRICS.typeId): which GPU, see gpu_metric_samples.device_id
  typeId AS type_id,
  -- nsys's id of the metric within its event type (GPU_METRICS.metricId; not stable across nsys versions)
  metricId AS metric_id,
  -- as gpu_metric_samples.metric
  regexp_replace(metricName, '\s*\[[^\]]*\]\s*$', '') AS metric,
  -- as gpu_metric_samples.unit
  nullif(regexp_extract(metricName, '\[([^\]]*)\]\s*$', 1), '') AS unit
FROM (SELECT DISTINCT typeId, metricId, metricName FROM raw_gpu_metric_names);

-- The samples as stored: one row per sample and metric of GPU_METRICS whose metric gpu_metric_names names,
-- with the metric's number rather than its names (what gpu_metric_samples spells out: read that one). Samples
-- before the session's time origin (timestamp < 0: the first sample of a capture range) are left out, as nsys's
-- recipes leave them out. One number rather than the two ids: millions of samples are written for
-- less, and the join that keeps only named samples gives it.
-- no ORDER BY: nsys writes GPU_METRICS in time order, and sorting millions of samples would cost the load more
-- than the readers' windows (which sort by partition) gain. The columns are declared first, each with the
-- compression method DuckDB would choose for it (below): naming the method spares DuckDB trying the others on
-- every value of millions, for the same stored table; then the samples are inserted.
CREATE OR REPLACE TABLE gpu_metric_values (
  -- the sample's metric: gpu_metric_names.key. Bit-packed: a few dozen small numbers, in no long runs
  key INTEGER USING COMPRESSION bitpacking,
  -- as gpu_metric_samples.timestamp_ns. Run-length encoded: nsys samples every metric of a device at once, so
  -- a timestamp comes once per metric in a row
  timestamp_ns BIGINT USING COMPRESSION rle,
  -- as gpu_metric_samples.value. ALP, DuckDB's method for doubles: nsys writes whole numbers (an INTEGER
  -- column), which it stores in a few bits each
  value DOUBLE USING COMPRESSION alp
);
-- The samples of a metric the names name. Where they name one event type (one GPU sampled), the samples of that
-- type meet the names on metricId alone, the type a constant test of each sample (a variable: DuckDB tests it as
-- it scans, where a subquery's value would be joined), which costs less than the join on both ids; else, the join
-- on both.
SET VARIABLE nsysql_one_metric_type = (
  SELECT CASE WHEN count(DISTINCT type_id) = 1 THEN min(type_id) END FROM gpu_metric_names
);
INSERT INTO gpu_metric_values
SELECT n.key, m.timestamp, m.value
FROM raw_gpu_metrics m
JOIN (SELECT DISTINCT metric_id, key FROM gpu_metric_names) n ON n.metric_id = m.metricId
WHERE m.typeId = getvariable('nsysql_one_metric_type') AND m.timestamp >= 0
UNION ALL
SELECT n.key, m.timestamp, m.value
FROM raw_gpu_metrics m
JOIN (
  SELECT DISTINCT type_id, metric_id, key FROM gpu_metric_names WHERE getvariable('nsysql_one_metric_type') IS NULL
) n
  ON n.type_id = m.typeId AND n.metric_id = m.metricId
WHERE m.timestamp >= 0;
RESET VARIABLE nsysql_one_metric_type;

-- One row per sample and metric: GPU_METRICS with the metric's name from TARGET_INFO_GPU_METRICS, joined on
-- (typeId, metricId): metric ids are not stable across nsys versions, names are. Empty when the export did not
-- sample GPU metrics (the tables are then absent and nothing is read). A view over gpu_metric_values and
-- gpu_metric_names: the names are stored once per metric, not once per sample.
-- The device is the low 8 bits of typeId: nsys's own recipes lay a GPU metrics typeId out as
-- <Hardware ID:8><VM ID:8><Source ID:16><Event tag:24><GPU ID:8> (nsys_recipe/lib/data_utils.py,
-- add_cols_from_type_id) and join that GPU ID with the kernels' deviceId (gpu_metric_util_sum --per-kernel).
CREATE OR REPLACE VIEW gpu_metric_samples AS
SELECT
  -- CUDA device id the sample was taken on, as in gpu_ops.device_id (typeId & 0xFF, see above)
  (n.type_id & 255)::INTEGER AS device_id,
  -- metric name without its bracketed unit, e.g. `SMs Active`, `Tensor Active`, `DRAM Read Bandwidth`
  n.metric,
  -- the bracketed unit of nsys's name, e.g. `Throughput %`, `MHz`, `Avg`, `Avg Warps per Cycle`; NULL when
  -- the name has none. As nsys labels it: see `nsysql metrics` for the counters whose values do not fit it
  n.unit,
  -- when the sample was taken, ns (the export's clock). A sample describes the sampling period that starts
  -- here, up to the device's next sampling period (gpu_metric_periods): its GR Active follows the kernels that
  -- ran after its timestamp, not before (checked against the kernels of fixtures/hw_mix)
  v.timestamp_ns,
  -- the sampled value, as nsys wrote it
  v.value
FROM gpu_metric_values v
JOIN gpu_metric_names n USING (key);

-- One row per device and sampling period: nsys samples every metric of a device at once, so a period is
-- computed once for all of them (not once per metric: a window over every sample cost more than reading them).
-- A view: made when a question reads it (0.2 s for 7.7M samples), not by every load.
-- nsys samples a device at a fixed frequency, so its period is the median spacing of its samples; where the next
-- sample comes more than half a period late, samples are missing (a capture paused, a buffer dropped) and the
-- one before the gap describes one period, not the gap (the same rule as gpu_activity_periods, 48_gpu_activity.sql).
CREATE OR REPLACE VIEW gpu_metric_periods AS
WITH t AS (
  SELECT device_id, t0_ns, lead(t0_ns) OVER w AS next_ns, lag(t0_ns) OVER w AS prev_ns
  FROM (SELECT DISTINCT key >> 23 AS device_id, timestamp_ns AS t0_ns FROM gpu_metric_values)
  WINDOW w AS (PARTITION BY device_id ORDER BY t0_ns)
), m AS (
  SELECT device_id, round(median(next_ns - t0_ns))::BIGINT AS period_ns FROM t GROUP BY device_id
)
SELECT
  -- CUDA device id, as in gpu_metric_samples.device_id
  device_id,
  -- the period's start: the timestamp_ns of the device's samples taken then, ns
  t0_ns,
  -- the period's end: the device's next sampling time, or one period on where that is more than half a period
  -- late (samples missing) and for the last (as long as the one before it, where that one was not late); NULL
  -- for a device sampled only once (its period is unknown), ns
  CASE WHEN next_ns - t0_ns <= 1.5 * period_ns THEN next_ns
       WHEN next_ns IS NULL AND t0_ns - prev_ns <= 1.5 * period_ns THEN 2 * t0_ns - prev_ns
       ELSE t0_ns + period_ns END AS t1_ns
FROM t JOIN m USING (device_id);

-- Each sample of the metrics `names` (NULL: all) with the sampling period it describes, [t0, t1)
-- (gpu_metric_periods): a sample weighs by time as far as its period overlaps a window. nsysql's own readers
-- (analyses/iteration_metrics.sql, range_metrics.sql) meet the periods with their windows first, through
-- overlaps_by_bucket (00_macros.sql), and join the samples after, once per period rather than once per sample;
-- those of SMs and Tensor Active alone read gpu_activity_periods (48_gpu_activity.sql).
CREATE OR REPLACE MACRO metric_periods(
  -- VARCHAR[]: metric names as in gpu_metric_samples.metric; NULL for every metric
  names
)
-- device_id, metric, unit, value as in gpu_metric_samples; t0, t1: the period, ns
AS TABLE
SELECT s.device_id, s.metric, s.unit, s.value, p.t0_ns AS t0, p.t1_ns AS t1
FROM gpu_metric_samples s
JOIN gpu_metric_periods p ON p.device_id = s.device_id AND p.t0_ns = s.timestamp_ns
WHERE names IS NULL OR list_contains(names, s.metric);
