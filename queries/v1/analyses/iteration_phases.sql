-- @tables nvtx_ranges
-- @macros range_family
-- @param $delimiter BOOLEAN: false: each instance is an iteration (a wrapper); true: instances delimit iterations
-- @param $totals VARCHAR: name of the table of per-range op totals, process rule (range_totals.sql, scratch.py)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration and child range (for a wrapper range: its direct children, e.g. `Forward Pass`; for a
-- delimiter range: the sibling ranges of the same thread and level that start inside the window, e.g.
-- `forward`, `backward`; one phase per range_family: `Batch3` is `Batch`, each call of `aten::zero_` is
-- `aten::zero_`): CPU time and the summed duration of the GPU ops attributed to it (process rule).
-- $windows: the table of the iteration windows (iteration_windows.sql); $delimiter as in iteration_windows.sql.
-- Kernels replayed from CUDA graph nodes and credited to the ranges that captured them (the capture rule of
-- op_ranges) are left out here: they ran when the graph was replayed, in whatever iteration launched it, not in
-- the one where the capturing range started (iteration_ranges.sql counts them by their launch).
WITH cand AS (
  SELECT r.* FROM nvtx_ranges r
  WHERE r.style = 'PushPop'  -- start/end ranges have depth 0 but no place among the thread's push/pop ranges
    AND r.pid = (SELECT any_value(pid) FROM query_table($windows))
    AND r.tid = (SELECT any_value(tid) FROM query_table($windows))
    AND r.depth = (SELECT any_value(depth) FROM query_table($windows))
                  + CASE WHEN $delimiter THEN 0 ELSE 1 END
), placed AS (
  SELECT i.iteration, i.range_id AS iter_range_id, c.range_id, c.name, c.parent_id, c.start_ns, c.end_ns
  FROM cand c ASOF JOIN query_table($windows) i ON c.start_ns >= i.start_ns
  WHERE c.start_ns < i.end_ns
), kept AS (
  SELECT * FROM placed WHERE CASE WHEN $delimiter THEN true ELSE parent_id = iter_range_id END
), gpu AS (
  SELECT range_id, (total_ns - captured_ns)::BIGINT AS gpu_ns FROM query_table($totals)  -- at any depth
  WHERE range_id IN (SELECT range_id FROM kept)
)
SELECT k.iteration, range_family(k.name) AS phase,
       sum(k.end_ns - k.start_ns)::BIGINT AS cpu_ns, coalesce(sum(g.gpu_ns), 0)::BIGINT AS gpu_ns
FROM kept k LEFT JOIN gpu g USING (range_id)
GROUP BY ALL
ORDER BY k.iteration, min(k.start_ns);
