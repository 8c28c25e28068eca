-- @tables api_calls, strings
-- @macros api_display_name, stats_durations
-- @param $top BIGINT: row limit, NULL for all

-- CUDA API calls: per function, the same quantity as `nsys stats -r cuda_api_sum` (CPU time inside the calls,
-- every thread of every process). Names as nsys prints them (api_display_name, 00_macros.sql).
-- $top: row limit, NULL for all.
-- A CUDA backtrace nsys wrote as a second row of its call (`--cudabacktrace`, nsys 2020-2022) is no call: api_calls
-- holds none (25_calls.sql).
WITH c AS (
  SELECT api_display_name(s.value) AS name,
         a.end_ns - a.start_ns AS d
  FROM api_calls a
  LEFT JOIN strings s ON s.id = a.name_id
)
SELECT
  -- API function
  name,
  -- calls
  count(*) AS count,
  -- time inside the calls, ns: total_ns (summed), avg_ns, med_ns, min_ns, max_ns, stddev_ns
  unnest(stats_durations(d)),
  -- share of all API time, %
  100.0 * sum(d) / sum(sum(d)) OVER () AS pct
FROM c
GROUP BY name
ORDER BY sum(d) DESC, name
LIMIT $top;
