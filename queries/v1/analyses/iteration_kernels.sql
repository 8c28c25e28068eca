-- @tables strings
-- @param $placed VARCHAR: name of the table of the process's ops with their iteration (placed_ops.sql, scratch.py)

-- Per iteration (of the windows placed_ops.sql placed the ops in: $placed) and GPU op name: summed GPU
-- time and count of the ops launched in the iteration (the launching API call's start, or the op's own start when no
-- call was traced), by any thread of process $pid. Names are the demangled kernel names, or nsysql's labels
-- for memcpy/memset/graph ops. Iterations without an op of a name have no row for it.
WITH ops AS (
  SELECT iteration, kind, name_id, end_ns - start_ns AS duration_ns FROM query_table($placed)
)
SELECT o.iteration, o.kind, s.value AS name, sum(o.duration_ns)::BIGINT AS ns, count(*) AS count
FROM ops o LEFT JOIN strings s ON s.id = o.name_id
GROUP BY ALL
ORDER BY o.iteration, ns DESC;
