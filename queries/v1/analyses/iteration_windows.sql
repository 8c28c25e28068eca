-- @tables nvtx_ranges
-- @macros range_op_name
-- @param $delimiter BOOLEAN: false: each instance is an iteration (a wrapper); true: instances delimit iterations
-- @param $depth BIGINT: the nesting depth of the iteration ranges
-- @param $names VARCHAR[]: the range names (a numbered family counts as one range)
-- @param $pid BIGINT: the process of the iteration ranges
-- @param $tid BIGINT: the thread of the iteration ranges

-- Iteration windows, one row per push/pop instance of the chosen range at one depth on its thread, in start order.
-- $pid, $tid, $depth: the thread and depth; $names: the range names (a numbered family counts as one range);
-- $delimiter: false = each instance is an iteration (wrapper range); true = an iteration runs from the start
-- of one instance to the start of the next (DLProf's key-node rule). The last one has no next start: it runs
-- over the sibling ranges that follow it as they followed the instance before it (at most as many siblings,
-- each of a name seen there, stopping at the first other name), so a loop's last step keeps its
-- `forward`/`backward`/`optimizer_step` but not the ranges the program opens after the loop.
-- The SELECT alone: iterations.windows() stores it as a temp table named for the range (iterations.Windows),
-- which the per-iteration queries read as query_table($windows).
WITH inst AS (
  SELECT range_id, pid, tid, name, depth, parent_id, start_ns, end_ns,
         lead(start_ns) OVER (ORDER BY start_ns, range_id) AS next_start_ns,
         lag(start_ns) OVER (ORDER BY start_ns, range_id) AS prev_start_ns
  FROM nvtx_ranges
  WHERE pid = $pid AND tid = $tid AND depth = $depth AND style = 'PushPop' AND list_contains($names, name)
), last AS (
  SELECT * FROM inst WHERE $delimiter AND next_start_ns IS NULL
), sibs AS (  -- the last instance's siblings: same thread, depth and parent, other than the instances
  SELECT s.start_ns, s.end_ns, s.name, s.start_ns < l.start_ns AS before_last
  FROM nvtx_ranges s, last l
  WHERE s.pid = l.pid AND s.tid = l.tid AND s.depth = l.depth AND s.parent_id IS NOT DISTINCT FROM l.parent_id
    AND s.start_ns >= l.prev_start_ns AND NOT list_contains($names, s.name)
), seen AS (  -- what followed the instance before the last one (PyTorch's operator calls by operator:
              -- range_op_name, as their per-call ids differ from step to step)
  SELECT list(DISTINCT range_op_name(name)) AS names, count(*) AS n FROM sibs WHERE before_last
), after AS (  -- the siblings after the last instance, numbered, and whether each is of a name seen before
  SELECT s.end_ns, row_number() OVER (ORDER BY s.start_ns, s.end_ns) AS k,
         list_contains(seen.names, range_op_name(s.name)) AS known
  FROM sibs s, seen WHERE NOT s.before_last
), last_end AS (
  SELECT max(a.end_ns) AS end_ns
  FROM after a, seen
  WHERE a.k <= seen.n AND a.k < coalesce((SELECT min(k) FROM after WHERE NOT known), seen.n + 1)
)
SELECT
  row_number() OVER (ORDER BY i.start_ns, i.range_id) - 1 AS iteration,
  i.range_id, i.pid, i.tid, i.name, i.depth, i.start_ns,
  CASE WHEN NOT $delimiter THEN i.end_ns
       WHEN i.next_start_ns IS NOT NULL THEN i.next_start_ns
       ELSE greatest(i.end_ns, coalesce((SELECT end_ns FROM last_end), i.end_ns)) END AS end_ns,
  i.end_ns - i.start_ns AS range_ns
FROM inst i;
