-- @tables strings
-- @macros ops_by_iteration
-- @param $ops VARCHAR: name of the table of the process's GPU ops with their launch (process_ops.sql, scratch.py)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration (rows of the table named $windows, made by iteration_windows.sql) and GPU op name: summed GPU
-- time and count of the ops launched in the iteration (the launching API call's start, or the op's own start when no
-- call was traced), by any thread of process $pid. Names are the demangled kernel names, or nsysql's labels
-- for memcpy/memset/graph ops. Iterations without an op of a name have no row for it.
WITH mine AS (
  SELECT kind, name_id, duration_ns, api_start_ns, start_ns
  FROM query_table($ops)
), ops AS (
  SELECT iteration, kind, name_id, duration_ns FROM ops_by_iteration('mine', $windows)
)
SELECT o.iteration, o.kind, s.value AS name, sum(o.duration_ns)::BIGINT AS ns, count(*) AS count
FROM ops o LEFT JOIN strings s ON s.id = o.name_id
GROUP BY ALL
ORDER BY o.iteration, ns DESC;
