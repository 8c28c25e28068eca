-- Kernels per NVTX range: the quantity of `nsys stats -r nvtx_kern_sum`, per (range name, domain, kernel).
-- $attribution: 'thread' (nsys's rule) or 'process'. $names: the range names to keep, NULL for all.
-- $innermost: when true each kernel counts only under the deepest of its (kept) ranges.
WITH m AS (
  SELECT x.op_id, r.range_id, r.name, r.domain, r.depth, r.start_ns
  FROM op_ranges x JOIN nvtx_ranges r USING (range_id)
  WHERE (x.via = 'thread' OR $attribution = 'process')
    AND ($names IS NULL OR list_contains($names, r.name))
), kept AS (
  SELECT * FROM m
  QUALIFY NOT $innermost
       OR row_number() OVER (PARTITION BY op_id ORDER BY depth DESC, start_ns DESC, range_id DESC) = 1
)
SELECT
  k.name AS range,
  k.domain,
  s.value AS kernel,
  -- range instances that enclose at least one of these kernels
  count(DISTINCT k.range_id) AS range_count,
  count(*) AS count,
  sum(o.duration_ns)::BIGINT AS total_ns,
  avg(o.duration_ns) AS avg_ns,
  median(o.duration_ns) AS med_ns,
  min(o.duration_ns) AS min_ns,
  max(o.duration_ns) AS max_ns,
  coalesce(stddev_samp(o.duration_ns), 0) AS stddev_ns
FROM kept k
JOIN gpu_ops o USING (op_id)
LEFT JOIN strings s ON s.id = o.name_id
WHERE o.kind = 'kernel'
GROUP BY k.name, k.domain, s.value
ORDER BY range, total_ns DESC, kernel;
