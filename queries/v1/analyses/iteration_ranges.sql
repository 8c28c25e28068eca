-- @tables nvtx_ranges
-- @macros range_family
-- @param $pid BIGINT: the process whose ranges count (any thread)
-- @param $totals VARCHAR: name of the table of per-range op totals, process rule (range_totals.sql, scratch.py)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration (rows of the table named $windows, made by iteration_windows.sql) and NVTX range family: CPU
-- time of the ranges of process $pid (any thread) that start inside the iteration window, and the summed
-- duration of the GPU ops attributed to them (process rule, see op_ranges). A numbered family (`Batch0`,
-- `Batch1`, ...) counts as one name (`Batch`), every call of a PyTorch operator as its operator (range_family).
-- The iteration ranges themselves are left out: their time is the iteration time.
-- Kernels replayed from CUDA graph nodes and credited to the ranges that captured them (the capture rule of
-- op_ranges) are left out of those ranges here: they ran in whatever iteration replayed the graph, where the
-- ranges open at the replay hold them, not in the one where the capturing range started.
WITH r AS (
  SELECT i.iteration, x.range_id, range_family(x.name) AS name, x.duration_ns
  FROM (SELECT * FROM nvtx_ranges WHERE pid = $pid
          AND range_id NOT IN (SELECT range_id FROM query_table($windows))) x
  ASOF JOIN query_table($windows) i ON x.start_ns >= i.start_ns
  WHERE x.start_ns < i.end_ns
), gpu AS (
  SELECT range_id, (total_ns - captured_ns)::BIGINT AS gpu_ns FROM query_table($totals)  -- at any depth
  WHERE range_id IN (SELECT range_id FROM r)
)
SELECT r.iteration, r.name, sum(r.duration_ns)::BIGINT AS cpu_ns, coalesce(sum(g.gpu_ns), 0)::BIGINT AS gpu_ns,
       count(*) AS count
FROM r LEFT JOIN gpu g USING (range_id)
GROUP BY ALL
ORDER BY r.iteration, cpu_ns DESC;
