-- @tables api_calls, strings
-- @param $pid BIGINT: the loop's process
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration (rows of the table named $windows): the time inside its window that threads of process $pid
-- spent in CUDA API calls that can wait for the GPU: synchronize and query calls, copies and sets (a copy waits
-- for the work before it on its stream; a pageable one for the CPU's staging too), frees (cudaFree waits for the
-- device), and launches of 50 us or more (a launch waits only where the queue is full: it takes microseconds
-- otherwise). On a step timed on the CPU (iterations' step_clock 'cpu'), GPU work that finishes sooner gives back
-- at most this time (nsysql/analyses/headroom.py: the busy pool's cap). An upper bound: calls of two threads at
-- once are counted twice, and a call is counted whole whether the GPU kept it waiting or not. Every iteration
-- has a row (0 where none waited).
WITH waiting AS (
  SELECT id AS name_id, value ILIKE '%launch%' AS launch
  FROM strings
  WHERE id IN (SELECT DISTINCT name_id FROM api_calls WHERE pid = $pid)
    AND (value ILIKE '%synchronize%' OR value ILIKE '%query%' OR value ILIKE '%memcpy%' OR value ILIKE '%memset%'
         OR value ILIKE '%free%' OR value ILIKE '%launch%')
), calls AS (
  SELECT a.start_ns, a.end_ns
  FROM api_calls a JOIN waiting w USING (name_id)
  WHERE a.pid = $pid AND (NOT w.launch OR a.end_ns - a.start_ns >= 50000)
)
SELECT
  w.iteration,
  -- time in calls that can wait for the GPU, clipped to the iteration's window, ns
  coalesce(sum(least(c.end_ns, w.end_ns) - greatest(c.start_ns, w.start_ns)), 0)::BIGINT AS gpu_wait_ns
FROM query_table($windows) w
LEFT JOIN calls c ON c.start_ns < w.end_ns AND c.end_ns > w.start_ns
GROUP BY w.iteration
ORDER BY w.iteration;
