-- @frames rank_iterations, rank_causes

-- Per rank, over its steady-state iterations (reads rank_iterations and rank_causes, the stacked per-rank
-- frames): iteration time mean and median, GPU busy %, idle, collective kernel time, exposed communication, the
-- top idle cause, and NCCL's NVTX ranges that start in those iterations and their CPU-side time.
WITH s AS (
  SELECT * FROM rank_iterations WHERE NOT warmup
), top_cause AS (
  SELECT rank, cause, idle_ns FROM rank_causes
  QUALIFY row_number() OVER (PARTITION BY rank ORDER BY idle_ns DESC, cause) = 1
)
SELECT
  s.rank,
  count(*) AS iterations,
  avg(s.wall_ns) AS mean_ns,
  median(s.wall_ns) AS median_ns,
  coalesce(stddev_samp(s.wall_ns), 0) AS stddev_ns,
  -- the share of the iteration windows in which the rank's device ran something
  100.0 * sum(s.wall_ns - s.idle_ns) / sum(s.wall_ns) AS gpu_busy_pct,
  sum(s.idle_ns)::BIGINT AS idle_ns,
  sum(s.collective_ns)::BIGINT AS collective_ns,
  100.0 * sum(s.collective_ns) / sum(s.wall_ns) AS collective_pct,
  -- the share of the iteration windows in which communication kernels ran with no compute kernel beside them
  -- on the device (iterations' exposed_comm_ns); NULL for a rank without communication
  CASE WHEN sum(s.comm_ns) > 0 THEN 100.0 * sum(s.exposed_comm_ns) / sum(s.wall_ns) END AS exposed_comm_pct,
  count(*) FILTER (WHERE s.outlier) AS outliers,
  any_value(t.cause) AS top_idle_cause,
  any_value(t.idle_ns) AS top_idle_cause_ns,
  coalesce(sum(s.nccl_ranges), 0)::BIGINT AS nccl_ranges,
  coalesce(sum(s.nccl_range_ns), 0)::BIGINT AS nccl_range_ns
FROM s
LEFT JOIN top_cause t USING (rank)
GROUP BY s.rank
ORDER BY s.rank;
