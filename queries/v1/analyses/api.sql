-- CUDA API calls: per function, the same quantity as `nsys stats -r cuda_api_sum` (CPU time inside the calls,
-- every thread of every process). Names as nsys prints them (api_display_name, 00_macros.sql).
-- $top: row limit, NULL for all.
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
  -- time inside the calls, summed, ns
  sum(d)::BIGINT AS total_ns,
  avg(d) AS avg_ns,
  median(d) AS med_ns,
  min(d) AS min_ns,
  max(d) AS max_ns,
  stats_stddev(d) AS stddev_ns,
  -- share of all API time, %
  100.0 * sum(d) / sum(sum(d)) OVER () AS pct
FROM c
GROUP BY name
ORDER BY total_ns DESC, name
LIMIT $top;
