-- @macros device_layers
-- @param $device INTEGER: the loop's device (the process's busiest)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration (rows of the table named $windows): the time inside its window in which copies between host and
-- device memory ran on device $device with no kernel beside them (device_layers' `host_copy` minus
-- `host_copy_hidden`: 46_device_layers.sql), whoever launched them, as iterations.sql measures exposed
-- communication. Every iteration has a row (0 where none ran).
WITH layers AS (
  SELECT layer, start_ns, end_ns, busy_before_ns
  FROM device_layers(coalesce($device, -1))
  WHERE layer IN ('host_copy', 'host_copy_hidden')
), w_edges AS (
  SELECT iteration, false AS is_end, start_ns AS t FROM query_table($windows)
  UNION ALL SELECT iteration, true, end_ns FROM query_table($windows)
), edges AS (  -- per layer, the time it covered before each window's start and end (gpu_busy.busy_before_ns)
  SELECT e.iteration, e.is_end, e.layer,
         coalesce(b.busy_before_ns + least(greatest(e.t - b.start_ns, 0), b.end_ns - b.start_ns), 0) AS covered
  FROM (SELECT * FROM w_edges, (VALUES ('host_copy'), ('host_copy_hidden')) l(layer)) e
  ASOF LEFT JOIN layers b ON e.layer = b.layer AND e.t >= b.start_ns
), inside AS (
  SELECT iteration, layer, max(covered) FILTER (WHERE is_end) - max(covered) FILTER (WHERE NOT is_end) AS ns
  FROM edges GROUP BY ALL
)
SELECT
  iteration,
  -- host<->device copy time with no kernel beside it inside the iteration's window, ns
  coalesce(max(ns) FILTER (WHERE layer = 'host_copy') - max(ns) FILTER (WHERE layer = 'host_copy_hidden'), 0)::BIGINT
    AS host_copy_exposed_ns
FROM inside
GROUP BY iteration
ORDER BY iteration;
