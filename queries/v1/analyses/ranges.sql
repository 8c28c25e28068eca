-- NVTX ranges: per (domain, name, style) the CPU-side statistics of `nsys stats -r nvtx_sum` and the
-- GPU projection of `nvtx_gpu_proj_sum`: per instance, first enclosed GPU op start to last enclosed GPU op
-- end, summed over instances, and the number of enclosed GPU ops.
-- $attribution: 'thread' (nsys's rule) or 'process' (see canonical/60_op_ranges.sql).
-- $group_ops: when true, names lose PyTorch's per-call arguments (range_op_name: `aten::addmm, seq = 5,
-- op_id = 9, ...` -> `aten::addmm`), so an emit_nvtx profile has one row per operator, not one per call.
WITH proj AS (
  SELECT x.range_id, min(o.start_ns) AS first_ns, max(o.end_ns) AS last_ns, count(*) AS ops
  FROM op_ranges x JOIN gpu_ops o USING (op_id)
  WHERE x.via = 'thread' OR $attribution = 'process'
  GROUP BY x.range_id
)
SELECT
  r.domain,
  r.name,
  r.style,
  count(*) AS count,
  sum(r.duration_ns)::BIGINT AS total_ns,
  avg(r.duration_ns) AS avg_ns,
  median(r.duration_ns) AS med_ns,
  min(r.duration_ns) AS min_ns,
  max(r.duration_ns) AS max_ns,
  stats_stddev(r.duration_ns) AS stddev_ns,
  -- sum over instances of (last enclosed GPU op end - first enclosed GPU op start)
  coalesce(sum(p.last_ns - p.first_ns), 0)::BIGINT AS gpu_total_ns,
  -- GPU ops enclosed, over all instances
  coalesce(sum(p.ops), 0)::BIGINT AS gpu_ops
FROM (SELECT * REPLACE (CASE WHEN $group_ops THEN range_op_name(name) ELSE name END AS name) FROM nvtx_ranges) r
LEFT JOIN proj p USING (range_id)
GROUP BY r.domain, r.name, r.style
ORDER BY total_ns DESC, r.domain, r.name;
