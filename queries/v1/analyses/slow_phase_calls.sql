-- @tables api_calls, gpu_ops, kernel_classes, nvtx_ranges, strings
-- @macros api_display_name
-- @param $range_name VARCHAR: the child range the slow steps' extra time grew in (findings.slow_phase)
-- @param $starts BIGINT[]: the slow steps' starts, ns
-- @param $ends BIGINT[]: their ends, ns, in the same order

-- What the CPU did in child range $range_name during the slow steps: the CUDA API call that took most of that range's
-- time there (on the thread that opened each instance, clipped to the instance and to the step), and how much
-- of that call's time the same process's GPU spent in communication kernels (kernel_classes category
-- `communication`: NCCL). One row, or none where no call ran there. A synchronize call that waits while a
-- collective runs is a wait for the other ranks, not work of the range.
WITH steps AS (
  SELECT unnest($starts) AS s, unnest($ends) AS e
), inst AS (  -- the range's instances inside the slow steps, clipped to them
  SELECT r.pid, r.tid, greatest(r.start_ns, w.s) AS s, least(r.end_ns, w.e) AS e
  FROM (SELECT pid, tid, start_ns, end_ns FROM nvtx_ranges WHERE name = $range_name) r
  JOIN steps w ON r.start_ns < w.e AND r.end_ns > w.s
), calls AS (  -- the calls on each instance's thread, clipped to it. A thread makes one call at a time, so a call
  -- inside an instance starts inside it: the instance each call falls in is the last one of its thread to start
  -- at or before it (one sorted pass, not every call against every instance)
  SELECT c.pid, c.name_id, greatest(c.start_ns, i.s) AS s, least(c.end_ns, i.e) AS e
  FROM api_calls c ASOF JOIN inst i ON c.pid = i.pid AND c.tid = i.tid AND c.start_ns >= i.s
  WHERE c.start_ns < i.e
), top AS (
  SELECT name_id, sum(e - s)::BIGINT AS call_ns FROM calls GROUP BY name_id ORDER BY call_ns DESC, name_id LIMIT 1
), comm_ops AS (  -- every communication kernel (few, against every op)
  SELECT o.pid, o.start_ns, o.end_ns
  FROM gpu_ops o JOIN kernel_classes k ON k.name_id = o.name_id
  WHERE o.kind = 'kernel' AND k.category = 'communication'
), comm AS (  -- those of the call's process, clipped to each of the top call's spans (NCCL runs its collectives
  -- one after another on its stream: their clipped times do not overlap)
  SELECT sum(least(o.end_ns, c.e) - greatest(o.start_ns, c.s)) AS comm_ns
  FROM (SELECT * FROM calls WHERE name_id = (SELECT name_id FROM top)) c
  JOIN comm_ops o ON o.start_ns < c.e AND o.end_ns > c.s
  WHERE o.pid = c.pid
)
SELECT
  -- the API function that took most of the range's time in the slow steps, as nsys prints it
  api_display_name(s.value) AS call,
  -- its time there, ns, over all the slow steps
  t.call_ns,
  -- the part of it in which the process's GPU ran communication kernels, ns (at most call_ns)
  least(coalesce((SELECT comm_ns FROM comm), 0), t.call_ns)::BIGINT AS comm_ns
FROM top t
LEFT JOIN strings s ON s.id = t.name_id;
