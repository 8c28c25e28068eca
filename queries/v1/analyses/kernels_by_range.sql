-- Kernels per NVTX range: the quantity of `nsys stats -r nvtx_kern_sum`, per (range name, domain, kernel).
-- $attribution: 'thread' (nsys's rule) or 'process'. $names: the range names to keep, NULL for all.
-- $innermost: when true each kernel counts only under the deepest of its (kept) ranges.
-- $group_ops: when true, names lose PyTorch's per-call arguments (range_op_name), as in ranges.sql.
-- Rows are grouped on small integer keys (one per range name and domain, one per kernel name) and the names
-- joined at the end, so the tens of millions of (kernel, range) pairs of a large profile carry no strings.
WITH rn AS (  -- the kept ranges, each with a key for its (name, domain)
  SELECT range_id, depth, start_ns, name, domain, dense_rank() OVER (ORDER BY name, domain) AS key
  FROM (SELECT * REPLACE (CASE WHEN $group_ops THEN range_op_name(name) ELSE name END AS name) FROM nvtx_ranges
        WHERE $names IS NULL OR list_contains($names, name))
), kname AS (  -- one key per distinct kernel name (ids with equal text count as one name)
  SELECT id AS name_id, min(id) OVER (PARTITION BY value) AS kkey FROM strings
), m AS (
  SELECT x.op_id, x.range_id, r.key, r.depth, r.start_ns
  FROM op_ranges x JOIN rn r USING (range_id)
  WHERE x.via = 'thread' OR $attribution = 'process'
), kept AS (
  SELECT op_id, range_id, key FROM m WHERE NOT $innermost
  UNION ALL
  SELECT op_id, range_id, key FROM m WHERE $innermost
  QUALIFY row_number() OVER (PARTITION BY op_id ORDER BY depth DESC, start_ns DESC, range_id DESC) = 1
), agg AS (
  SELECT
    k.key, n.kkey,
    count(DISTINCT k.range_id) AS range_count,
    count(*) AS count,
    sum(o.duration_ns)::BIGINT AS total_ns,
    avg(o.duration_ns) AS avg_ns,
    median(o.duration_ns) AS med_ns,
    min(o.duration_ns) AS min_ns,
    max(o.duration_ns) AS max_ns,
    stats_stddev(o.duration_ns) AS stddev_ns
  FROM kept k
  JOIN gpu_ops o USING (op_id)
  LEFT JOIN kname n ON n.name_id = o.name_id
  WHERE o.kind = 'kernel'
  GROUP BY k.key, n.kkey
)
SELECT
  r.name AS range,
  r.domain,
  s.value AS kernel,
  -- range instances that enclose at least one of these kernels
  a.range_count,
  a.count,
  a.total_ns,
  a.avg_ns,
  a.med_ns,
  a.min_ns,
  a.max_ns,
  a.stddev_ns
FROM agg a
JOIN (SELECT DISTINCT key, name, domain FROM rn) r USING (key)
LEFT JOIN strings s ON s.id = a.kkey
ORDER BY range, total_ns DESC, kernel;
