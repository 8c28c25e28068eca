-- @tables gpu_ops, nvtx_ranges, op_ranges
-- @macros range_op_name
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)
-- @param $group_ops BOOLEAN: range names lose PyTorch's per-call arguments (range_op_name), as kernels_by_range
-- @param $innermost BOOLEAN: each launch counts only under the deepest of its kept ranges, as kernels_by_range
-- @param $names VARCHAR[]: the range names to keep, NULL for all (kernels_by_range's --range)

-- CUDA graph launches traced whole (kernels_whole_graphs.sql) per NVTX range (domain, name) open around their
-- launch under $attribution, of the ranges $names keeps: launches and their GPU time (total_ns). A launch counts
-- in every range enclosing it, as kernels_by_range.sql counts a kernel (so in each of its nested ranges), or with
-- $innermost only in the deepest of them (the latest started at equal depth), as kernels_by_range.sql's
-- `deepest`; the ranges with most GPU time first. No launch in a kept range: no row.
WITH around AS (
  SELECT x.op_id, o.duration_ns, r.domain,
         CASE WHEN $group_ops THEN range_op_name(r.name) ELSE r.name END AS range
  FROM op_ranges x
  JOIN gpu_ops o USING (op_id)
  JOIN nvtx_ranges r USING (range_id)
  WHERE o.kind = 'graph' AND (x.via = 'thread' OR $attribution = 'process')
    AND ($names IS NULL OR list_contains($names, r.name))
  QUALIFY NOT $innermost
       OR row_number() OVER (PARTITION BY x.op_id ORDER BY r.depth DESC, r.start_ns DESC, r.range_id DESC) = 1
)
SELECT range, domain, count(*) AS launches, sum(duration_ns)::BIGINT AS total_ns
FROM around
GROUP BY ALL
ORDER BY total_ns DESC, range, domain;
