-- @tables gpu_ops, nvtx_ranges
-- @macros range_family
-- @param $delimiter BOOLEAN: false: each instance is an iteration (a wrapper); true: instances delimit iterations
-- @param $pid BIGINT: the process of the windows' thread
-- @param $tid BIGINT: the thread of the iteration ranges
-- @param $placed VARCHAR: name of the table of the process's ops with their iteration (placed_ops.sql, scratch.py)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- What iterations.detect tests before it takes a range family as the loop, measured on the windows in the
-- table named $windows (iteration_windows.sql, through iterations.Windows): one row. $pid, $tid: the thread
-- of the windows; $delimiter as in iteration_windows.sql.
-- The work: kernels and CUDA graph launches when process $pid launched any, else every GPU op it launched (a
-- copy benchmark); nothing when it launched none (an NVTX-only profile). An op belongs to the window in which
-- it was launched, as in iterations.sql.
WITH proc AS (  -- the process's ops, from gpu_ops: their kind and length are all that is read of them here, and
               -- the ops with their launch (launched_ops.sql) hold the same rows, at the cost of a join
  SELECT kind, duration_ns FROM gpu_ops WHERE pid = $pid
), compute AS (
  SELECT count(*) FILTER (WHERE kind IN ('kernel', 'graph')) > 0 AS has_compute,
         count(*) FILTER (WHERE kind = 'graph') > 0 AS has_graphs
  FROM proc
), work AS (
  SELECT p.* FROM proc p, compute c WHERE p.kind IN ('kernel', 'graph') OR NOT c.has_compute
), placed AS (  -- the work ops placed in their iterations
  SELECT p.iteration, p.name_id, p.end_ns - p.start_ns AS duration_ns FROM query_table($placed) p, compute c
  WHERE p.kind IN ('kernel', 'graph') OR NOT c.has_compute
), by_name AS (
  SELECT iteration, name_id, count(*) AS n, sum(duration_ns) AS ns FROM placed GROUP BY iteration, name_id
), ops AS (
  SELECT iteration, sum(n) AS n, sum(ns) AS ns, list(name_id) AS names FROM by_name GROUP BY iteration
), cand AS (  -- the child ranges of iteration_phases.sql: a wrapper's direct children, a delimiter's siblings
  SELECT r.range_id, r.name, r.parent_id, r.start_ns FROM nvtx_ranges r
  WHERE r.pid = $pid AND r.tid = $tid AND r.style = 'PushPop'
    AND r.depth = (SELECT any_value(depth) FROM query_table($windows))
                  + CASE WHEN $delimiter THEN 0 ELSE 1 END
    AND r.range_id NOT IN (SELECT range_id FROM query_table($windows))
), kids AS (
  SELECT i.iteration, list(DISTINCT range_family(c.name)) AS names
  FROM cand c ASOF JOIN query_table($windows) i ON c.start_ns >= i.start_ns
  WHERE c.start_ns < i.end_ns AND (CASE WHEN $delimiter THEN true ELSE c.parent_id = i.range_id END)
  GROUP BY i.iteration
), per AS (  -- what the iteration holds: the names of its work ops (ids) and the families of its child ranges
            -- (range_family: PyTorch's operator ranges by operator, whatever their per-call ids)
  SELECT w.iteration, w.end_ns - w.start_ns AS wall_ns, coalesce(o.n, 0) AS ops, coalesce(o.ns, 0) AS ns,
         coalesce(o.names, []) AS kn, coalesce(k.names, []) AS rn
  FROM query_table($windows) w LEFT JOIN ops o USING (iteration) LEFT JOIN kids k USING (iteration)
), pairs AS (
  SELECT *, lag(kn) OVER (ORDER BY iteration) AS pkn, lag(rn) OVER (ORDER BY iteration) AS prn FROM per
), sim AS (  -- j: Jaccard similarity of an iteration's names (both kinds) and the previous one's; two that hold
             -- nothing are alike
  SELECT *, CASE WHEN pkn IS NULL THEN NULL
                 WHEN len(kn) + len(rn) + len(pkn) + len(prn) = 0 THEN 1.0
                 ELSE (len(list_intersect(kn, pkn)) + len(list_intersect(rn, prn)))
                      / (len(list_distinct(list_concat(kn, pkn))) + len(list_distinct(list_concat(rn, prn)))) END AS j
  FROM pairs
), totals AS (
  SELECT (SELECT count(*) FROM proc) AS ops, (SELECT has_compute FROM compute) AS has_compute,
         (SELECT has_graphs FROM compute) AS has_graphs,
         (SELECT sum(duration_ns) FROM work) AS work_ns,
         (SELECT max(end_ns) - min(start_ns) FROM nvtx_ranges
          WHERE pid = $pid AND tid = $tid AND style = 'PushPop') AS extent_ns
)
SELECT
  -- rows of the windows: the iterations a table of this family has
  count(*) AS iterations,
  -- what counts as work: 'kernels', 'kernels or CUDA graphs', 'GPU ops', or NULL (the process has none)
  CASE WHEN any_value(t.ops) = 0 THEN NULL
       WHEN any_value(t.has_graphs) THEN 'kernels or CUDA graphs'
       WHEN any_value(t.has_compute) THEN 'kernels' ELSE 'GPU ops' END AS work,
  -- iterations that launch some of that work
  count(*) FILTER (WHERE s.ops > 0) AS with_work,
  -- median Jaccard similarity of consecutive iterations' kernel and child range names
  median(s.j)::DOUBLE AS resemblance,
  -- the share of the process's work time launched inside the iterations
  (sum(s.ns) / nullif(any_value(t.work_ns), 0))::DOUBLE AS work_share,
  -- the share of the thread's NVTX extent (first push to last pop) that the iterations cover
  (sum(s.wall_ns) / nullif(any_value(t.extent_ns), 0))::DOUBLE AS wall_share
FROM sim s, totals t;
