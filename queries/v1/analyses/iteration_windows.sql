-- Iteration windows, one row per instance of the chosen range on its thread, in start order.
-- $pid, $tid: the thread; $names: the range names (a numbered family counts as one range);
-- $delimiter: false = each instance is an iteration (wrapper range); true = an iteration runs from the start
-- of one instance to the start of the next (DLProf's key-node rule), the last one to the end of its siblings.
CREATE OR REPLACE TEMP TABLE _iterations AS
WITH inst AS (
  SELECT range_id, pid, tid, name, depth, parent_id, start_ns, end_ns,
         lead(start_ns) OVER (ORDER BY start_ns, range_id) AS next_start_ns
  FROM nvtx_ranges
  WHERE pid = $pid AND tid = $tid AND list_contains($names, name)
), last_sibling AS (
  SELECT max(s.end_ns) AS end_ns
  FROM nvtx_ranges s, (SELECT * FROM inst WHERE next_start_ns IS NULL) l
  WHERE s.pid = l.pid AND s.tid = l.tid AND s.depth = l.depth AND s.start_ns >= l.start_ns
    AND s.parent_id IS NOT DISTINCT FROM l.parent_id
)
SELECT
  row_number() OVER (ORDER BY i.start_ns, i.range_id) - 1 AS iteration,
  i.range_id, i.pid, i.tid, i.name, i.depth, i.start_ns,
  CASE WHEN NOT $delimiter THEN i.end_ns
       WHEN i.next_start_ns IS NOT NULL THEN i.next_start_ns
       ELSE greatest(i.end_ns, (SELECT end_ns FROM last_sibling)) END AS end_ns,
  i.end_ns - i.start_ns AS range_ns
FROM inst i;
