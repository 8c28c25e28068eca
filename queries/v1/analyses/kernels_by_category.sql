-- @param $device_id BIGINT: only this device's kernels (the loop's, findings.py); NULL: every device's
-- @tables gpu_ops, kernel_classes, kernel_tensor_use
-- @macros kernel_tensor_cores, tensor_cores_evidence

-- Kernel time per category and tensor-core use (kernel_classes, by the rules of kernel_rules): the kernels
-- table summed by its category and tensor_cores columns, counted per launch from gpu_ops. tensor_cores is what
-- the GPU metrics measured where they judge the kernel (kernel_tensor_use.measured), else what its name says;
-- `evidence` says which: `metrics`, `name`, or `metrics+name` for a row holding kernels of both.
WITH k AS (
  SELECT name_id, count(*) AS n, sum(duration_ns) AS t
  FROM gpu_ops
  WHERE kind = 'kernel' AND ($device_id IS NULL OR device_id = $device_id)
  GROUP BY name_id
)
SELECT
  coalesce(c.category, 'other') AS category,
  kernel_tensor_cores(u.measured, c.tensor_cores) AS tensor_cores,
  sum(k.n)::BIGINT AS count,
  sum(k.t)::BIGINT AS total_ns,
  -- share of all kernel time, %
  100.0 * sum(k.t) / sum(sum(k.t)) OVER () AS pct,
  tensor_cores_evidence(u.measured) AS evidence
FROM k
LEFT JOIN kernel_classes c ON c.name_id = k.name_id
LEFT JOIN kernel_tensor_use u ON u.name_id = k.name_id
GROUP BY ALL
ORDER BY total_ns DESC, category, tensor_cores;
