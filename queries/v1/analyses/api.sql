-- CUDA API calls: per function, the same quantity as `nsys stats -r cuda_api_sum` (CPU time inside the calls,
-- every thread of every process). Names as nsys prints them: a four-digit version suffix is dropped
-- (`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`), longer ones kept (`cudaLaunchKernelExC_v11060`).
-- $top: row limit, NULL for all.
WITH c AS (
  SELECT CASE WHEN s.value SIMILAR TO '.*_v[0-9]{4}' THEN s.value[:-7] ELSE s.value END AS name,
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
