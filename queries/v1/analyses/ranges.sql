-- @tables gpu_ops, nvtx_ranges
-- @macros family_label, family_name, is_torch_range, range_op_name, stats_durations
-- @param $group_ops BOOLEAN: names lose PyTorch's per-call arguments (range_op_name)
-- @param $totals VARCHAR: name of the table of per-range op totals (range_totals.sql, analyses/scratch.py)
-- @param $families BOOLEAN: numbered families of two or more names as one row (`Batch*`)

-- NVTX ranges: per (domain, name, style) the CPU-side statistics of `nsys stats -r nvtx_sum` and the
-- GPU projection of `nvtx_gpu_proj_sum`: per instance, first enclosed GPU op start to last enclosed GPU op
-- end (per graph replay for the ops of CUDA graph nodes it captured: op_range_totals.proj_ns), summed over
-- instances (a span: GPU idle time inside it counts), the GPU time of the enclosed ops (their summed
-- durations, as nvtx_kern_sum's totals), and the number of enclosed GPU ops; all three NULL where the profile
-- holds no GPU op at all (none traced, or all left out as flawed).
-- $totals: the table of op_range_totals by one rule, 'thread' (nsys's) or 'process' (canonical/60_op_ranges.sql),
-- made by range_totals.sql.
-- $group_ops: when true, names lose PyTorch's per-call arguments (range_op_name: `aten::addmm, seq = 5,
-- op_id = 9, ...` -> `aten::addmm`), so an emit_nvtx profile has one row per operator, not one per call.
-- $families: when true, the names of a numbered family (family_name: `Batch0`..`Batch59`, two names or more in
-- one domain; PyTorch's operator ranges never) are one row, named by family_label (`Batch*`), with the
-- statistics over all their instances and `names`, how many names it folds (1 for a name of its own).
-- The projection comes from op_range_totals (canonical/60_op_ranges.sql): time linear in the ops whatever the
-- nesting depth.
WITH proj AS (
  SELECT range_id, proj_ns, ops, total_ns FROM query_table($totals)
),
traced AS (  -- whether the profile holds any GPU op: without one, a range's GPU figures are unknown (NULL), not 0
  SELECT EXISTS (SELECT 1 FROM gpu_ops) AS any_op
),
named AS (
  SELECT * REPLACE (CASE WHEN $group_ops THEN range_op_name(name) ELSE name END AS name) FROM nvtx_ranges
),
labels AS (  -- each (domain, name) and the row it is shown in
  SELECT domain, name,
         CASE WHEN $families AND family_name(name) NOT IN (name, '') AND NOT is_torch_range(name)
                   AND count(*) OVER (PARTITION BY domain, family_name(name)) > 1
              THEN family_label(name) ELSE name END AS label
  FROM (SELECT DISTINCT domain, name FROM named)
)
SELECT
  r.domain,
  l.label AS name,
  r.style,
  count(DISTINCT r.name) AS names,
  count(*) AS count,
  unnest(stats_durations(r.duration_ns)),
  -- sum over instances of (last enclosed GPU op end - first enclosed GPU op start), per graph replay for
  -- captured graph nodes (op_range_totals): nsys's projected time
  CASE WHEN t.any_op THEN coalesce(sum(p.proj_ns), 0) END::BIGINT AS gpu_proj_ns,
  -- summed durations of the enclosed GPU ops (ops that run side by side on several streams each count)
  CASE WHEN t.any_op THEN coalesce(sum(p.total_ns), 0) END::BIGINT AS gpu_time_ns,
  -- GPU ops enclosed, over all instances
  CASE WHEN t.any_op THEN coalesce(sum(p.ops), 0) END::BIGINT AS gpu_ops
FROM named r
JOIN labels l ON l.domain IS NOT DISTINCT FROM r.domain AND l.name IS NOT DISTINCT FROM r.name
LEFT JOIN proj p USING (range_id)
CROSS JOIN traced t
GROUP BY r.domain, l.label, r.style, t.any_op
ORDER BY sum(r.duration_ns) DESC, r.domain, l.label;
