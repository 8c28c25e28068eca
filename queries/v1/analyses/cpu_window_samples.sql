-- @tables cpu_samples, strings
-- @param $ends BIGINT[]: each window's end, ns (excluded)
-- @param $ids BIGINT[]: the windows' ids (parallel lists with $starts, $ends)
-- @param $starts BIGINT[]: each window's start, ns

-- CPU samples taken inside time windows: one row per window, thread, stack and leaf frame, with the number of
-- samples. A sample counts in every window that holds its instant [start, end).
WITH w AS (
  SELECT unnest($ids) AS window_id, unnest($starts) AS start_ns, unnest($ends) AS end_ns
)
SELECT w.window_id, s.pid, s.tid, s.stack_id, s.leaf_frame_id, f.value AS leaf_frame, m.value AS leaf_module,
       count(*) AS samples
FROM cpu_samples s
JOIN w ON s.ts_ns >= w.start_ns AND s.ts_ns < w.end_ns
LEFT JOIN strings f ON f.id = s.leaf_frame_id
LEFT JOIN strings m ON m.id = s.leaf_module_id
GROUP BY ALL;
