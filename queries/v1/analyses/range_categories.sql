-- @tables gpu_ops, kernel_classes, kernel_tensor_use, nvtx_ranges, op_ranges
-- @macros kernel_tensor_cores, range_op_name, tensor_cores_evidence
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)

-- Kernel time per NVTX range (domain, name), category and tensor-core use: kernels_by_category.sql for the
-- kernels each range encloses, counted in every range open around their launch as nvtx_kern_sum counts them
-- (canonical/60_op_ranges.sql; $attribution: 'thread' or 'process'). pct is of the range's kernel time.
-- Under 'process' PyTorch's ranges are named without their per-call arguments (range_op_name: one row per
-- operator, as ranges.sql by default); under 'thread' by their full names, as nvtx_kern_sum.
WITH k AS (
  SELECT CASE WHEN $attribution = 'process' THEN range_op_name(r.name) ELSE r.name END AS range, r.domain,
         o.name_id, o.duration_ns
  FROM op_ranges x
  JOIN gpu_ops o USING (op_id)
  JOIN nvtx_ranges r USING (range_id)
  WHERE o.kind = 'kernel' AND (x.via = 'thread' OR $attribution = 'process')
)
SELECT
  k.range,
  k.domain,
  coalesce(c.category, 'other') AS category,
  kernel_tensor_cores(u.measured, c.tensor_cores) AS tensor_cores,
  count(*) AS count,
  sum(k.duration_ns)::BIGINT AS total_ns,
  -- share of the range's kernel time, %
  100.0 * sum(k.duration_ns) / sum(sum(k.duration_ns)) OVER (PARTITION BY k.domain, k.range) AS pct,
  tensor_cores_evidence(u.measured) AS evidence
FROM k
LEFT JOIN kernel_classes c ON c.name_id = k.name_id
LEFT JOIN kernel_tensor_use u ON u.name_id = k.name_id
GROUP BY k.domain, k.range, coalesce(c.category, 'other'), kernel_tensor_cores(u.measured, c.tensor_cores)
ORDER BY k.domain, k.range, total_ns DESC, category, tensor_cores;
