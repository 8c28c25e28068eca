-- @frames rank_iterations

-- Per iteration index across ranks: the slowest rank, its time, the median of the others, and by how much
-- it was slower; plus the spread of collective time.
WITH ranked AS (
  SELECT iteration, rank, wall_ns, collective_ns, warmup,
         row_number() OVER (PARTITION BY iteration ORDER BY wall_ns DESC, rank) AS pos,
         count(*) OVER (PARTITION BY iteration) AS ranks
  FROM rank_iterations
)
SELECT
  iteration,
  any_value(ranks) AS ranks,
  bool_or(warmup) AS warmup,
  max(rank) FILTER (WHERE pos = 1) AS slowest_rank,
  max(wall_ns) FILTER (WHERE pos = 1) AS slowest_ns,
  median(wall_ns) FILTER (WHERE pos > 1) AS others_median_ns,
  max(wall_ns) FILTER (WHERE pos = 1) - median(wall_ns) FILTER (WHERE pos > 1) AS slower_by_ns,
  max(collective_ns) AS max_collective_ns,
  min(collective_ns) AS min_collective_ns
FROM ranked
GROUP BY iteration
ORDER BY iteration;
