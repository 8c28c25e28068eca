-- nsysql canonical schema v1: whether matrix kernels ran on tensor cores, as the GPU metrics measured it.

-- One row per matrix kernel name (kernel_classes category gemm, conv or attention) that ran while GPU metrics
-- were sampled on its device; empty when the export has no GPU metrics (gpu_metric_samples). Names lie in both
-- directions, and Tensor Active does not: where it judges a kernel (`measured`), it overrides the name's rule
-- (kernels, kernels --by category, the finding `matrix math without tensor cores`).
-- Each sample counts for its sampling period (see gpu_metric_samples.timestamp_ns) as far as it overlaps one
-- of the kernel's executions. The rule of `measured`, only where own_share >= 0.5 (the samples that overlap
-- the kernel are mostly its own time, so its neighbours cannot decide): `yes` when Tensor Active averages
-- 10% or more over its executions; `no` when Tensor Active averages under 1% while SMs Active averages 50% or
-- more (the SMs were busy with it, and not on tensor cores); else NULL (the name decides).
CREATE OR REPLACE TABLE kernel_tensor_use AS
-- Not materialized: without samples DuckDB then sees the join below as empty and reads next to nothing of gpu_ops.
WITH s AS NOT MATERIALIZED (  -- the two metrics, each sample with the end of its period: the next one, or one
                              -- period on
  SELECT device_id, starts_with(metric, 'Tensor') AS tensor, value, timestamp_ns AS t0,
         coalesce(lead(timestamp_ns) OVER w, 2 * timestamp_ns - lag(timestamp_ns) OVER w) AS t1
  FROM gpu_metric_samples
  -- their names across nsys versions and GPU generations (Turing: `Tensor Active / FP16 Active`)
  WHERE metric IN ('Tensor Active', 'Tensor Active / FP16 Active', 'SMs Active', 'SM Active')
    AND (unit IS NULL OR contains(unit, '%'))
  WINDOW w AS (PARTITION BY device_id, metric, unit ORDER BY timestamp_ns)
), k AS (
  SELECT o.name_id, o.device_id, o.start_ns, o.end_ns
  FROM gpu_ops o
  WHERE o.kind = 'kernel'
    AND o.name_id IN (SELECT name_id FROM kernel_classes WHERE category IN ('gemm', 'conv', 'attention'))
), period AS (  -- per device, a bucket width for the join below: the median sampling period
  SELECT device_id, greatest(1, median(t1 - t0))::BIGINT AS p FROM s GROUP BY device_id
), sb AS (  -- each sample in every bucket its period touches (one or two)
  SELECT s.*, unnest(range(s.t0 // q.p, (s.t1 - 1) // q.p + 1)) AS bucket, q.p
  FROM s JOIN period q USING (device_id)
  WHERE s.t1 > s.t0
), kb AS (  -- each kernel in every bucket it spans
  SELECT k.*, unnest(range(k.start_ns // q.p, (k.end_ns - 1) // q.p + 1)) AS bucket
  FROM k JOIN period q USING (device_id)
  WHERE k.end_ns > k.start_ns
), ov AS (
  -- an equi-join on (device, bucket) instead of a range join of every kernel with every sample: a pair that
  -- overlaps meets in each bucket both touch, and counts once, in the bucket where the overlap begins
  SELECT kb.name_id, sb.tensor, sb.value, sb.t1 - sb.t0 AS period,
         least(sb.t1, kb.end_ns) - greatest(sb.t0, kb.start_ns) AS w
  FROM kb JOIN sb ON sb.device_id = kb.device_id AND sb.bucket = kb.bucket
  WHERE sb.t0 < kb.end_ns AND sb.t1 > kb.start_ns AND greatest(sb.t0, kb.start_ns) // sb.p = sb.bucket
), per AS (
  SELECT name_id,
         sum(w) FILTER (WHERE tensor) AS sampled_ns,
         sum(w) FILTER (WHERE tensor) / sum(period) FILTER (WHERE tensor) AS own_share,
         sum(value * w) FILTER (WHERE tensor) / sum(w) FILTER (WHERE tensor) AS tensor_active_pct,
         sum(value * w) FILTER (WHERE NOT tensor) / sum(w) FILTER (WHERE NOT tensor) AS sm_active_pct
  FROM ov
  GROUP BY name_id
)
SELECT
  -- strings.id of the kernel's demangled name (gpu_ops.name_id, kernel_classes.name_id)
  name_id,
  -- time of its executions covered by Tensor Active samples, ns
  sampled_ns::BIGINT AS sampled_ns,
  -- share of the sampling periods overlapping its executions that its executions fill (0-1)
  own_share,
  -- Tensor Active over its executions, time-weighted, %
  tensor_active_pct,
  -- SMs Active over its executions, time-weighted, %
  sm_active_pct,
  -- yes / no by the rule above; NULL where the samples cannot say
  CASE WHEN own_share >= 0.5 AND tensor_active_pct >= 10 THEN 'yes'
       WHEN own_share >= 0.5 AND tensor_active_pct < 1 AND sm_active_pct >= 50 THEN 'no' END AS measured
FROM per
WHERE sampled_ns > 0;
