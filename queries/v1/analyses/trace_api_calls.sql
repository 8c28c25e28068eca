-- @tables api_calls, strings
-- @param $t0 BIGINT: start of the time window, ns
-- @param $t1 BIGINT: end of the time window, ns

-- CUDA API calls for the trace timeline: one row per api_calls row that overlaps [$t0, $t1] (ns), on its
-- process and thread, in start order (longer first at one instant: a runtime call before the driver call in it).
SELECT
  a.pid, a.tid, a.start_ns, a.end_ns - a.start_ns AS duration_ns,
  coalesce(n.value, '(no name)') AS name, a.correlation_id
FROM api_calls a
LEFT JOIN strings n ON n.id = a.name_id
WHERE a.start_ns <= $t1 AND a.end_ns >= $t0
ORDER BY a.pid, a.tid, a.start_ns, a.end_ns DESC, a.call_id;
