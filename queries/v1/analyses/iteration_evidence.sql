-- What iterations.detect tests before it takes a range family as the loop, measured on the windows in
-- _iterations (iteration_windows.sql): one row. $pid, $tid: the thread of the windows; $delimiter as in
-- iteration_windows.sql.
-- The work: kernels and CUDA graph launches when process $pid launched any, else every GPU op it launched (a
-- copy benchmark); nothing when it launched none (an NVTX-only profile). An op belongs to the window in which
-- it was launched, as in iterations.sql.
WITH proc AS (
  SELECT kind, name_id, duration_ns, coalesce(api_start_ns, start_ns) AS t FROM gpu_ops WHERE pid = $pid
), compute AS (
  SELECT count(*) FILTER (WHERE kind IN ('kernel', 'graph')) > 0 AS has_compute FROM proc
), work AS (
  SELECT p.* FROM proc p, compute c WHERE p.kind IN ('kernel', 'graph') OR NOT c.has_compute
), placed AS (
  SELECT i.iteration, w.name_id, w.duration_ns
  FROM work w ASOF JOIN _iterations i ON w.t >= i.start_ns
  WHERE w.t < i.end_ns
), ops AS (
  SELECT iteration, count(*) AS n, sum(duration_ns) AS ns, list(DISTINCT 'k' || name_id) AS names
  FROM placed GROUP BY iteration
), cand AS (  -- the child ranges of iteration_phases.sql: a wrapper's direct children, a delimiter's siblings
  SELECT r.range_id, r.name, r.parent_id, r.start_ns FROM nvtx_ranges r
  WHERE r.pid = $pid AND r.tid = $tid AND r.style = 'PushPop'
    AND r.depth = (SELECT any_value(depth) FROM _iterations) + CASE WHEN $delimiter THEN 0 ELSE 1 END
    AND r.range_id NOT IN (SELECT range_id FROM _iterations)
), kids AS (
  SELECT i.iteration, list(DISTINCT 'r' || regexp_replace(c.name, '[ _#:-]*[0-9]+$', '')) AS names
  FROM cand c ASOF JOIN _iterations i ON c.start_ns >= i.start_ns
  WHERE c.start_ns < i.end_ns AND (CASE WHEN $delimiter THEN true ELSE c.parent_id = i.range_id END)
  GROUP BY i.iteration
), per AS (  -- sig: what the iteration holds, the names of its work ops and of its child ranges
  SELECT w.iteration, w.end_ns - w.start_ns AS wall_ns, coalesce(o.n, 0) AS ops, coalesce(o.ns, 0) AS ns,
         list_concat(coalesce(o.names, []), coalesce(k.names, [])) AS sig
  FROM _iterations w LEFT JOIN ops o USING (iteration) LEFT JOIN kids k USING (iteration)
), pairs AS (
  SELECT sig, lag(sig) OVER (ORDER BY iteration) AS prev FROM per
), sim AS (  -- Jaccard similarity of consecutive iterations' names; two that hold nothing are alike
  SELECT CASE WHEN len(sig) + len(prev) = 0 THEN 1.0
              ELSE len(list_intersect(sig, prev)) / len(list_distinct(list_concat(sig, prev))) END AS j
  FROM pairs WHERE prev IS NOT NULL
)
SELECT
  -- rows of _iterations: the iterations a table of this family has
  (SELECT count(*) FROM per) AS iterations,
  -- what counts as work: 'kernels' (kernels and graph launches), 'GPU ops', or NULL (the process has none)
  CASE WHEN NOT EXISTS (SELECT 1 FROM proc) THEN NULL
       WHEN (SELECT has_compute FROM compute) THEN 'kernels' ELSE 'GPU ops' END AS work,
  -- iterations that launch some of that work
  (SELECT count(*) FILTER (WHERE ops > 0) FROM per) AS with_work,
  -- median Jaccard similarity of consecutive iterations' kernel and child range names
  (SELECT median(j) FROM sim)::DOUBLE AS resemblance,
  -- the share of the process's work time launched inside the iterations
  ((SELECT sum(ns) FROM per) / nullif((SELECT sum(duration_ns) FROM work), 0))::DOUBLE AS work_share,
  -- the share of the thread's NVTX extent (first push to last pop) that the iterations cover
  ((SELECT sum(wall_ns) FROM per) / nullif((SELECT max(end_ns) - min(start_ns) FROM nvtx_ranges
                                            WHERE pid = $pid AND tid = $tid AND style = 'PushPop'), 0))::DOUBLE
    AS wall_share;
