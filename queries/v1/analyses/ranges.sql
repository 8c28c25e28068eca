-- @tables gpu_ops, nvtx_ranges
-- @macros op_range_totals, range_op_name, stats_durations
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)
-- @param $group_ops BOOLEAN: names lose PyTorch's per-call arguments (range_op_name)

-- NVTX ranges: per (domain, name, style) the CPU-side statistics of `nsys stats -r nvtx_sum` and the
-- GPU projection of `nvtx_gpu_proj_sum`: per instance, first enclosed GPU op start to last enclosed GPU op
-- end (per graph replay for the ops of CUDA graph nodes it captured: op_range_totals.proj_ns), summed over
-- instances, and the number of enclosed GPU ops.
-- $attribution: 'thread' (nsys's rule) or 'process' (see canonical/60_op_ranges.sql).
-- $group_ops: when true, names lose PyTorch's per-call arguments (range_op_name: `aten::addmm, seq = 5,
-- op_id = 9, ...` -> `aten::addmm`), so an emit_nvtx profile has one row per operator, not one per call.
-- The projection comes from op_range_totals (canonical/60_op_ranges.sql): time linear in the ops whatever the
-- nesting depth.
WITH proj AS (
  SELECT range_id, proj_ns, ops FROM op_range_totals($attribution)
)
SELECT
  r.domain,
  r.name,
  r.style,
  count(*) AS count,
  unnest(stats_durations(r.duration_ns)),
  -- sum over instances of (last enclosed GPU op end - first enclosed GPU op start), per graph replay for
  -- captured graph nodes (op_range_totals)
  coalesce(sum(p.proj_ns), 0)::BIGINT AS gpu_total_ns,
  -- GPU ops enclosed, over all instances
  coalesce(sum(p.ops), 0)::BIGINT AS gpu_ops
FROM (SELECT * REPLACE (CASE WHEN $group_ops THEN range_op_name(name) ELSE name END AS name) FROM nvtx_ranges) r
LEFT JOIN proj p USING (range_id)
GROUP BY r.domain, r.name, r.style
ORDER BY sum(r.duration_ns) DESC, r.domain, r.name;
