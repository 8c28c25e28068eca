-- @include 00_macros.sql, 40_gpu_ops.sql, 45_kernel_classes.sql, 48_gpu_activity.sql
-- @tables gpu_activity_names, gpu_activity_periods, gpu_ops, kernel_classes
-- @macros overlaps_by_bucket
-- @defines kernel_tensor_use
-- @empty_without gpu_activity_periods

-- nsysql canonical schema v1: whether matrix kernels ran on tensor cores, as the GPU metrics measured it.

-- One row per matrix kernel name (kernel_classes category gemm, conv or attention) that ran alone on its device
-- during at least one GPU metrics sample (below); empty when the export has no GPU metrics
-- (gpu_activity_periods). Names lie in both directions, and Tensor Active does not: where it judges a kernel
-- (`measured`), it overrides the name's rule (kernels, kernels --by category, the finding `matrix math without
-- tensor cores`).
-- SMs Active and Tensor Active are device-wide: a sample describes whatever ran on the device during its
-- sampling period (gpu_activity_periods.t0_ns, t1_ns), never one kernel of several. So a sample speaks for a
-- kernel name only where every GPU op of its device that overlaps the period is a kernel of that name (its own
-- executions, on any stream): no other kernel, memset or whole-graph replay (whose kernels are not recorded)
-- beside or before or after it in that period. Memory copies do not count: they run on the copy engines, not
-- on the SMs or tensor cores. Work the export did not trace (another program on the GPU) cannot be seen, and
-- is assumed absent, as in every device-wide reading of these counters. A kernel never alone in a whole
-- sampling period (shorter than it, or always beside other work) has no row: the name decides. Each such
-- sample counts for its sampling period as far as it overlaps one of the kernel's executions. The rule of `measured`, only where own_share >= 0.5 (the kernel
-- filled at least half of those periods, the device idle the rest): `yes` when Tensor Active averages 10% or
-- more over them; `no` when Tensor Active averages under 1% while SMs Active averages 50% or more (the SMs were
-- busy with it, and not on tensor cores); else NULL (the name decides). Turing's counter, `Tensor Active / FP16
-- Active` (gpu_activity_names), counts the half-precision (FP16x2) pipe with the tensor cores: high, it cannot
-- tell them apart, so it never says `yes` (under 1% it still says `no`: neither ran).
CREATE OR REPLACE TABLE kernel_tensor_use AS
WITH s AS (  -- the two metrics' sampling periods, both values in one row (gpu_activity_periods), and whether
            -- the device's tensor counter counts the tensor cores alone
  SELECT p.device_id, p.sm_active AS sm, p.tensor_active AS tensor, p.t0_ns AS t0, p.t1_ns AS t1,
         coalesce(n.metric = 'Tensor Active', false) AS tensor_only
  FROM gpu_activity_periods p
  LEFT JOIN gpu_activity_names n ON n.device_id = p.device_id AND n.tensor
), o AS (  -- every GPU op that runs on the SMs (all but copies), as windows
  SELECT o.name_id, o.device_id, o.start_ns AS a, o.end_ns AS b, o.kind = 'kernel' AS kernel
  FROM gpu_ops o
  WHERE o.kind <> 'memcpy'
    AND EXISTS (SELECT 1 FROM gpu_activity_periods)  -- without samples, read nothing of gpu_ops
), ov AS (
  SELECT device_id, t0, name_id, kernel, sm, tensor, tensor_only, t1 - t0 AS period, overlap_ns AS w
  FROM overlaps_by_bucket('o', 's')
), alone AS (  -- the periods during which ops of one kernel name only ran on the device, with that name
  SELECT device_id, t0, any_value(name_id) AS name_id, any_value(sm) AS sm, any_value(tensor) AS tensor,
         any_value(tensor_only) AS tensor_only,
         -- executions of the name on several streams at once fill the period once
         least(sum(w), any_value(period)) AS w, any_value(period) AS period
  FROM ov
  GROUP BY device_id, t0
  HAVING count(DISTINCT name_id) = 1 AND count(name_id) = count(*) AND bool_and(kernel)
), per AS (  -- each metric over the periods that sampled it
  SELECT name_id,
         sum(w) FILTER (WHERE tensor IS NOT NULL) AS sampled_ns,
         sum(w) FILTER (WHERE tensor IS NOT NULL) / sum(period) FILTER (WHERE tensor IS NOT NULL) AS own_share,
         sum(tensor * w) / sum(w) FILTER (WHERE tensor IS NOT NULL) AS tensor_active_pct,
         sum(sm * w) / sum(w) FILTER (WHERE sm IS NOT NULL) AS sm_active_pct,
         bool_and(tensor_only) FILTER (WHERE tensor IS NOT NULL) AS tensor_only
  FROM alone
  WHERE name_id IN (SELECT name_id FROM kernel_classes WHERE category IN ('gemm', 'conv', 'attention'))
  GROUP BY name_id
)
SELECT
  -- strings.id of the kernel's demangled name (gpu_ops.name_id, kernel_classes.name_id)
  name_id,
  -- time of its executions covered by Tensor Active samples during which it ran alone on its device, ns
  sampled_ns::BIGINT AS sampled_ns,
  -- share of those sampling periods that its executions fill (0-1)
  own_share,
  -- Tensor Active over its executions in those periods, time-weighted, %
  tensor_active_pct,
  -- SMs Active over its executions in those periods, time-weighted, %
  sm_active_pct,
  -- yes / no by the rule above; NULL where the samples cannot say
  CASE WHEN own_share >= 0.5 AND tensor_active_pct >= 10 AND tensor_only THEN 'yes'
       WHEN own_share >= 0.5 AND tensor_active_pct < 1 AND sm_active_pct >= 50 THEN 'no' END AS measured
FROM per
WHERE sampled_ns > 0;
