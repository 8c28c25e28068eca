-- @tables strings, thread_states
-- @param $ends BIGINT[]: each window's end, ns
-- @param $ids BIGINT[]: the windows' ids (parallel lists with $starts, $ends)
-- @param $starts BIGINT[]: each window's start, ns

-- The time each thread spent in each state (thread_states: running, off_cpu, blocked in an OS call) inside time
-- windows: one row per window, thread, state and call, with the overlap in ns. The two sources of
-- thread_states overlap each other (a blocked call holds off-CPU time), never themselves on one thread.
WITH w AS (
  SELECT unnest($ids) AS window_id, unnest($starts) AS start_ns, unnest($ends) AS end_ns
)
SELECT w.window_id, t.pid, t.tid, t.state, t.source, s.value AS call,
       sum(least(t.end_ns, w.end_ns) - greatest(t.start_ns, w.start_ns))::BIGINT AS overlap_ns
FROM thread_states t
JOIN w ON t.start_ns < w.end_ns AND t.end_ns > w.start_ns
LEFT JOIN strings s ON s.id = t.call_id
GROUP BY ALL;
