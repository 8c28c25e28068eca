-- Top kernels: per kernel name, the same quantity as `nsys stats -r cuda_gpu_kern_sum`.
-- $name_kind: 'demangled' (nsys's default), 'short' or 'mangled'. $top: row limit, NULL for all.
WITH k AS (
  SELECT CASE $name_kind WHEN 'short' THEN short_name WHEN 'mangled' THEN mangled_name ELSE name END AS name,
         duration_ns AS d
  FROM gpu_ops
  WHERE kind = 'kernel'
)
SELECT
  name,
  count(*) AS count,
  sum(d)::BIGINT AS total_ns,
  avg(d) AS avg_ns,
  median(d) AS med_ns,
  min(d) AS min_ns,
  max(d) AS max_ns,
  coalesce(stddev_samp(d), 0) AS stddev_ns,
  -- share of all kernel time, %
  100.0 * sum(d) / sum(sum(d)) OVER () AS pct
FROM k
GROUP BY name
ORDER BY total_ns DESC, name
LIMIT $top;
