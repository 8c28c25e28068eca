-- Candidates for the iteration range: push/pop range families (names with trailing numbers stripped:
-- Batch0..Batch59 -> Batch) per thread and depth, with how often they repeat, whether their instances
-- enclose child ranges, and, for the main thread of each process with GPU work (process_roles), that
-- process's GPU op count (0 on other threads).
WITH fam AS (
  SELECT r.*, regexp_replace(r.name, '[ _#:-]*[0-9]+$', '') AS family
  FROM nvtx_ranges r
  WHERE r.style = 'PushPop'
), kids AS (
  SELECT parent_id AS range_id, count(*) AS n FROM nvtx_ranges WHERE parent_id IS NOT NULL GROUP BY 1
), thread_ops AS (
  SELECT pid, main_tid AS tid, ops FROM process_roles
)
SELECT
  f.pid, f.tid, f.depth, f.family,
  count(*) AS instances,
  list(DISTINCT f.name ORDER BY f.name) AS names,
  min(f.start_ns) AS first_start_ns,
  count(k.range_id) AS with_children,
  coalesce(any_value(t.ops), 0) AS thread_ops
FROM fam f
LEFT JOIN kids k USING (range_id)
LEFT JOIN thread_ops t ON t.pid = f.pid AND t.tid = f.tid
GROUP BY f.pid, f.tid, f.depth, f.family
ORDER BY thread_ops DESC, f.depth, instances DESC, first_start_ns;
