-- @macros memory_held
-- @param $pid BIGINT: the process of the iterations
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- GPU memory per iteration (rows of the table named $windows) and device: what process $pid held when the
-- iteration began, at most during it and when it ended (memory_held, canonical/47_gpu_memory.sql), and the
-- growth: end minus start. An iteration that frees all it allocates grows by 0; a steady positive growth is
-- memory kept from step to step (a leak, or a cache filling). pid: the process whose memory it is, the loop's
-- (in an export of several processes, the others' memory is not in these rows: `nsysql iterations` says whose
-- loop it is).
WITH win AS (
  SELECT * FROM query_table($windows) WHERE pid = $pid
)
SELECT w.iteration, m.device_id, m.start_bytes, m.peak_bytes, m.end_bytes,
       m.end_bytes - m.start_bytes AS growth_bytes, w.pid
FROM win w
JOIN memory_held($windows) m ON m.pid = w.pid AND m.start_ns = w.start_ns AND m.end_ns = w.end_ns
ORDER BY w.iteration, m.device_id;
