-- @tables kernel_classes, kernel_tensor_use
-- @macros kernel_tensor_cores, tensor_cores_evidence
-- @param $placed VARCHAR: name of the table of the process's ops with their iteration (placed_ops.sql, scratch.py)

-- Kernel time per iteration (of the windows placed_ops.sql placed the ops in: $placed), category and
-- tensor-core use: kernels_by_category.sql for the kernels launched in each iteration (as iterations.sql: by any
-- thread of process $pid, at the launching call's start). pct is of the iteration's kernel time.
WITH k AS (
  SELECT iteration, name_id, end_ns - start_ns AS duration_ns FROM query_table($placed) WHERE kind = 'kernel'
)
SELECT
  k.iteration,
  coalesce(c.category, 'other') AS category,
  kernel_tensor_cores(u.measured, c.tensor_cores) AS tensor_cores,
  count(*) AS count,
  sum(k.duration_ns)::BIGINT AS total_ns,
  -- share of the iteration's kernel time, %
  100.0 * sum(k.duration_ns) / sum(sum(k.duration_ns)) OVER (PARTITION BY k.iteration) AS pct,
  tensor_cores_evidence(u.measured) AS evidence
FROM k
LEFT JOIN kernel_classes c ON c.name_id = k.name_id
LEFT JOIN kernel_tensor_use u ON u.name_id = k.name_id
GROUP BY k.iteration, coalesce(c.category, 'other'), kernel_tensor_cores(u.measured, c.tensor_cores)
ORDER BY k.iteration, total_ns DESC, category, tensor_cores;
