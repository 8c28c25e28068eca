-- @tables gpu_ops, nvtx_ranges, op_range_links
-- @macros op_range_totals, ops_by_iteration, range_family
-- @param $pid BIGINT: the process whose ranges count (any thread)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration (rows of the table named $windows, made by iteration_windows.sql) and NVTX range family: CPU
-- time of the ranges of process $pid (any thread) that start inside the iteration window, and the summed
-- duration of the GPU ops attributed to them (process rule, see op_ranges). A numbered family (`Batch0`,
-- `Batch1`, ...) counts as one name (`Batch`), every call of a PyTorch operator as its operator (range_family).
-- The iteration ranges themselves are left out: their time is the iteration time.
-- Kernels replayed from CUDA graph nodes count for the ranges that captured them (the capture rule of op_ranges)
-- in the iteration that launched them, not in the one where the range started: a `layer 3` captured before the
-- loop has, in each step, the GPU time of that step's replay of its kernels (and no CPU time or instance there).
WITH r AS (
  SELECT i.iteration, x.range_id, range_family(x.name) AS name, x.duration_ns
  FROM (SELECT * FROM nvtx_ranges WHERE pid = $pid
          AND range_id NOT IN (SELECT range_id FROM query_table($windows))) x
  ASOF JOIN query_table($windows) i ON x.start_ns >= i.start_ns
  WHERE x.start_ns < i.end_ns
), gpu AS (  -- op_ranges' sums, at any depth, less the captured ops (by their launch, below)
  SELECT range_id, (total_ns - captured_ns)::BIGINT AS gpu_ns FROM op_range_totals('process')
  WHERE range_id IN (SELECT range_id FROM r)
), captured AS (  -- the captured ops of the process's ranges, with the range that captured them
  SELECT l.range_id, o.duration_ns, o.api_start_ns, o.start_ns
  FROM op_range_links l JOIN gpu_ops o USING (op_id)
  WHERE l.via = 'capture' AND o.pid = $pid
    AND l.range_id NOT IN (SELECT range_id FROM query_table($windows))
), rows AS (
  SELECT r.iteration, r.name, r.duration_ns AS cpu_ns, coalesce(g.gpu_ns, 0) AS gpu_ns, 1 AS n
  FROM r LEFT JOIN gpu g USING (range_id)
  UNION ALL
  SELECT c.iteration, range_family(x.name), 0, c.duration_ns, 0
  FROM ops_by_iteration('captured', $windows) c JOIN nvtx_ranges x USING (range_id)
)
SELECT iteration, name, sum(cpu_ns)::BIGINT AS cpu_ns, sum(gpu_ns)::BIGINT AS gpu_ns, sum(n)::BIGINT AS count
FROM rows
GROUP BY ALL
ORDER BY iteration, cpu_ns DESC, gpu_ns DESC, name;
