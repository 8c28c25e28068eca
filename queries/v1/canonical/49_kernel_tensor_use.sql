-- @include 00_macros.sql, 40_gpu_ops.sql, 45_kernel_classes.sql, 48_gpu_activity.sql
-- @tables gpu_activity_periods, gpu_ops, kernel_classes
-- @macros overlaps_by_bucket
-- @defines kernel_tensor_use
-- @empty_without gpu_activity_periods

-- nsysql canonical schema v1: whether matrix kernels ran on tensor cores, as the GPU metrics measured it.

-- One row per matrix kernel name (kernel_classes category gemm, conv or attention) that ran while GPU metrics
-- were sampled on its device; empty when the export has no GPU metrics (gpu_activity_periods). Names lie in both
-- directions, and Tensor Active does not: where it judges a kernel (`measured`), it overrides the name's rule
-- (kernels, kernels --by category, the finding `matrix math without tensor cores`).
-- Each sample counts for its sampling period (gpu_activity_periods.t0_ns, t1_ns) as far as it overlaps one
-- of the kernel's executions. The rule of `measured`, only where own_share >= 0.5 (the samples that overlap
-- the kernel are mostly its own time, so its neighbours cannot decide): `yes` when Tensor Active averages
-- 10% or more over its executions; `no` when Tensor Active averages under 1% while SMs Active averages 50% or
-- more (the SMs were busy with it, and not on tensor cores); else NULL (the name decides).
CREATE OR REPLACE TABLE kernel_tensor_use AS
WITH s AS (  -- the two metrics' sampling periods, both values in one row (gpu_activity_periods)
  SELECT device_id, sm_active AS sm, tensor_active AS tensor, t0_ns AS t0, t1_ns AS t1
  FROM gpu_activity_periods
), k AS (  -- the matrix kernels' executions, as windows
  SELECT o.name_id, o.device_id, o.start_ns AS a, o.end_ns AS b
  FROM gpu_ops o
  WHERE o.kind = 'kernel'
    AND o.name_id IN (SELECT name_id FROM kernel_classes WHERE category IN ('gemm', 'conv', 'attention'))
    AND EXISTS (SELECT 1 FROM gpu_activity_periods)  -- without samples, read nothing of gpu_ops
), ov AS (
  SELECT name_id, sm, tensor, t1 - t0 AS period, overlap_ns AS w FROM overlaps_by_bucket('k', 's')
), per AS (  -- each metric over the periods that sampled it
  SELECT name_id,
         sum(w) FILTER (WHERE tensor IS NOT NULL) AS sampled_ns,
         sum(w) FILTER (WHERE tensor IS NOT NULL) / sum(period) FILTER (WHERE tensor IS NOT NULL) AS own_share,
         sum(tensor * w) / sum(w) FILTER (WHERE tensor IS NOT NULL) AS tensor_active_pct,
         sum(sm * w) / sum(w) FILTER (WHERE sm IS NOT NULL) AS sm_active_pct
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
