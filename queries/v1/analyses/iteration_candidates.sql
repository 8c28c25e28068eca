-- @tables nvtx_ranges, process_roles
-- @macros family_name, family_number, is_torch_range

-- Candidates for the iteration range: push/pop range families (names with trailing numbers stripped:
-- Batch0..Batch59 -> Batch) per thread and depth, with how often they repeat, whether their instances
-- enclose child ranges, and, for the main thread of each process with GPU work (process_roles), that
-- process's GPU op count (0 on other threads); thread_ranges: the push/pop ranges of the thread. In the order
-- iterations.detect tries them: main threads of the busiest processes first, then outermost, most repeated.
-- A family's numbers must count something: distinct, and spanning at most twice as many values as there are
-- (Batch0..Batch59, step_1..step_100). Otherwise each name stands alone: ids are not iterations.
-- Ranges PyTorch opens itself (is_torch_range: emit_nvtx, `nsys profile --pytorch=autograd-nvtx`) are never
-- candidates: they name PyTorch's work, one per operator call (`aten::mul, op_id = 314339`), never the user's
-- step; an operator is called as often within one step as across steps.
WITH named AS (
  SELECT r.*, family_name(r.name) AS stem,
         family_number(r.name) AS num
  FROM nvtx_ranges r
  WHERE r.style = 'PushPop' AND NOT is_torch_range(r.name)
), counters AS (  -- stems whose numbers run like a counter
  SELECT pid, tid, depth, stem
  FROM named
  GROUP BY pid, tid, depth, stem
  HAVING count(num) = 0
      OR max(num) - min(num) + 1 <= 2 * count(DISTINCT num)
), fam AS (
  SELECT n.*, CASE WHEN c.stem IS NOT NULL THEN n.stem ELSE n.name END AS family
  FROM named n LEFT JOIN counters c USING (pid, tid, depth, stem)
), kids AS (
  SELECT parent_id AS range_id, count(*) AS n FROM nvtx_ranges WHERE parent_id IS NOT NULL GROUP BY 1
), thread_ops AS (
  SELECT pid, main_tid AS tid, ops FROM process_roles
), thread_ranges AS (
  SELECT pid, tid, count(*) AS n FROM nvtx_ranges WHERE style = 'PushPop' GROUP BY pid, tid
)
SELECT
  f.pid, f.tid, f.depth, f.family,
  count(*) AS instances,
  list(DISTINCT f.name ORDER BY f.name) AS names,
  min(f.start_ns) AS first_start_ns,
  count(k.range_id) AS with_children,
  coalesce(any_value(t.ops), 0) AS thread_ops,
  any_value(n.n) AS thread_ranges
FROM fam f
LEFT JOIN kids k USING (range_id)
LEFT JOIN thread_ops t ON t.pid = f.pid AND t.tid = f.tid
JOIN thread_ranges n ON n.pid = f.pid AND n.tid = f.tid
GROUP BY f.pid, f.tid, f.depth, f.family
ORDER BY thread_ops DESC, thread_ranges DESC, f.pid, f.tid, f.depth, instances DESC, first_start_ns, f.family;
