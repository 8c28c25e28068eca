-- Per iteration (rows of the table named $windows, made by iteration_windows.sql) and GPU op name: summed GPU
-- time and count of the ops launched in the iteration (the launching API call's start, or the op's own start when no
-- call was traced), by any thread of process $pid. Names are the demangled kernel names, or nsysql's labels
-- for memcpy/memset/graph ops. Iterations without an op of a name have no row for it.
WITH ops AS (
  SELECT i.iteration, o.kind, o.name_id, o.duration_ns
  FROM (SELECT *, coalesce(api_start_ns, start_ns) AS t FROM gpu_ops WHERE pid = $pid) o
  ASOF JOIN query_table($windows) i ON o.t >= i.start_ns
  WHERE o.t < i.end_ns
)
SELECT o.iteration, o.kind, s.value AS name, sum(o.duration_ns)::BIGINT AS ns, count(*) AS count
FROM ops o LEFT JOIN strings s ON s.id = o.name_id
GROUP BY ALL
ORDER BY o.iteration, ns DESC;
