-- @param $ops VARCHAR: name of the table of every GPU op with its launch (launched_ops.sql, scratch.py)
-- @param $empty_queue_ns BIGINT: a kernel starting later than this after its call returned found the queue empty, ns
-- @param $device_id BIGINT: only this device's kernels (the loop's, findings.py); NULL: every device's

-- The figures the launch-bound finding rests on (nsysql/analyses/findings.py), over every kernel whose launching
-- call was traced, with the definitions of launches.sql: how many kernels found the queue empty (started no
-- later than $empty_queue_ns after their call returned, or before it returned), the median launch call, the
-- median time from one kernel's launch call to the next one's in the same process (what the CPU takes per
-- kernel: the call and the work before the next call), against the median kernel.
WITH k AS (
  SELECT start_ns, end_ns, api_start_ns, api_end_ns,
         lead(api_start_ns) OVER (PARTITION BY pid ORDER BY api_start_ns) - api_start_ns AS interval_ns
  FROM query_table($ops)
  WHERE kind = 'kernel' AND api_start_ns IS NOT NULL AND ($device_id IS NULL OR device_id = $device_id)
)
SELECT
  -- kernels with a traced launch call
  count(*) AS kernels,
  -- of them, those that started at most $empty_queue_ns after their launch call returned
  count(*) FILTER (WHERE start_ns - api_end_ns <= $empty_queue_ns) AS empty_queue,
  -- median launch call, ns
  median(api_end_ns - api_start_ns) AS api_med_ns,
  -- median time from a kernel's launch call to the process's next one, ns (NULL: fewer than two launches)
  median(interval_ns) AS interval_med_ns,
  -- median kernel, ns
  median(end_ns - start_ns) AS kernel_med_ns
FROM k;
