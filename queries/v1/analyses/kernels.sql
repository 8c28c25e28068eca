-- @tables gpu_ops, kernel_classes, kernel_tensor_use, strings
-- @macros kernel_tensor_cores, stats_durations
-- @param $name_kind VARCHAR: 'demangled' (nsys's default), 'short' or 'mangled'
-- @param $top BIGINT: row limit, NULL for all

-- Top kernels: per kernel name, the same quantity as `nsys stats -r cuda_gpu_kern_sum`.
-- $name_kind: 'demangled' (nsys's default), 'short' or 'mangled'. $top: row limit, NULL for all.
-- After nsys's columns: category and tensor_cores (kernel_classes, by the rules of kernel_rules), which belong
-- to demangled names; a short name over demangled names of several categories lists them all ('copy|elementwise').
-- tensor_cores is what the GPU metrics measured where they judge the kernel (kernel_tensor_use.measured), else
-- what its name says.
WITH k AS (
  SELECT CASE $name_kind WHEN 'short' THEN short_name_id WHEN 'mangled' THEN mangled_name_id ELSE name_id END
           AS name_id,
         name_id AS class_id,
         duration_ns AS d
  FROM gpu_ops
  WHERE kind = 'kernel'
), agg AS (
  SELECT
    name_id,
    count(*) AS count,
    unnest(stats_durations(d))
  FROM k
  GROUP BY name_id
), classes AS (
  SELECT p.name_id,
         string_agg(DISTINCT coalesce(c.category, 'other'), '|' ORDER BY coalesce(c.category, 'other')) AS category,
         string_agg(DISTINCT kernel_tensor_cores(u.measured, c.tensor_cores), '|'
                    ORDER BY kernel_tensor_cores(u.measured, c.tensor_cores)) AS tensor_cores
  FROM (SELECT DISTINCT name_id, class_id FROM k) p
  LEFT JOIN kernel_classes c ON c.name_id = p.class_id
  LEFT JOIN kernel_tensor_use u ON u.name_id = p.class_id
  GROUP BY p.name_id
)
SELECT
  s.value AS name,
  a.* EXCLUDE (name_id),
  -- share of all kernel time, %
  100.0 * a.total_ns / sum(a.total_ns) OVER () AS pct,
  c.category,
  c.tensor_cores
FROM agg a
LEFT JOIN strings s ON s.id = a.name_id
LEFT JOIN classes c ON c.name_id IS NOT DISTINCT FROM a.name_id
ORDER BY a.total_ns DESC, name
LIMIT $top;
