-- @tables python_frames, python_samples
-- @param $ends BIGINT[]: each window's end, ns (excluded)
-- @param $ids BIGINT[]: the windows' ids (parallel lists with $starts, $ends)
-- @param $starts BIGINT[]: each window's start, ns

-- Python samples taken inside time windows: one row per window and sample, with its frames innermost first.
WITH w AS (
  SELECT unnest($ids) AS window_id, unnest($starts) AS start_ns, unnest($ends) AS end_ns
)
SELECT w.window_id, s.pid, s.tid, s.sample_id,
       list({'function': f.function, 'file': f.file, 'line': f.line} ORDER BY f.depth) AS frames
FROM python_samples s
JOIN w ON s.ts_ns >= w.start_ns AND s.ts_ns < w.end_ns
JOIN python_frames f USING (sample_id)
GROUP BY ALL;
