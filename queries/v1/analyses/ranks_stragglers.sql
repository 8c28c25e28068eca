-- @frames rank_iterations
-- @param $excess_share DOUBLE: share of the median steady iteration time that counts
-- @param $min_excess BIGINT: the least excess that counts, ns
-- @param $noise_k DOUBLE: how many MADs of a rank's own times are its noise
-- @param $wait_share DOUBLE: share of r's excess idle another rank's wait must reach

-- Stragglers (rule in nsysql/analyses/ranks.py): rank r in iteration i when, with T = max($min_excess,
-- $excess_share x the median steady iteration time of all ranks),
-- - its iteration time exceeds its own steady-state median by >= max(T, $noise_k x the median absolute deviation
--   (MAD) of its own steady-state iteration times): slow beyond its own noise,
-- - its GPU idle time exceeds its own steady-state median by >= T: its GPU waited on its CPU side, and
-- - another rank's collective time exceeds that rank's own median, in i or i+1, by >= max($wait_share x r's
--   excess idle, $noise_k x the MAD of that rank's own collective time): it waited for r, beyond its noise.
WITH med AS (
  SELECT rank, median(wall_ns) AS step_med, median(idle_ns) AS idle_med, median(collective_ns) AS coll_med
  FROM rank_iterations WHERE NOT warmup GROUP BY rank
), base AS (
  SELECT m.rank, m.step_med, m.idle_med, m.coll_med,
         median(abs(i.wall_ns - m.step_med)) AS step_mad, median(abs(i.collective_ns - m.coll_med)) AS coll_mad
  FROM rank_iterations i JOIN med m USING (rank)
  WHERE NOT i.warmup
  GROUP BY ALL
), threshold AS (
  SELECT greatest($min_excess, $excess_share * median(wall_ns)) AS t FROM rank_iterations WHERE NOT warmup
), x AS (
  SELECT i.rank, i.iteration, i.wall_ns - b.step_med AS excess_step_ns, b.step_mad,
         i.idle_ns - b.idle_med AS excess_idle_ns, i.collective_ns - b.coll_med AS excess_coll_ns, b.coll_mad,
         i.top_cause, i.os_call, i.wall_ns
  FROM rank_iterations i JOIN base b USING (rank)
  WHERE NOT i.warmup
), late AS (
  SELECT x.* FROM x, threshold
  WHERE x.excess_step_ns >= greatest(threshold.t, $noise_k * x.step_mad) AND x.excess_idle_ns >= threshold.t
), waits AS (
  SELECT l.rank, l.iteration, l.excess_step_ns, l.step_mad, l.excess_idle_ns, l.top_cause, l.os_call,
         o.rank AS waiting_rank, o.iteration - l.iteration AS wait_lag, o.excess_coll_ns AS wait_ns
  FROM late l JOIN x o
    ON o.rank <> l.rank AND o.iteration IN (l.iteration, l.iteration + 1)
   AND o.excess_coll_ns >= greatest($wait_share * l.excess_idle_ns, $noise_k * o.coll_mad)
)
SELECT rank, iteration, excess_step_ns, step_mad AS step_mad_ns, excess_idle_ns, top_cause, os_call, waiting_rank,
       wait_lag, wait_ns
FROM waits
QUALIFY row_number() OVER (PARTITION BY rank, iteration, waiting_rank ORDER BY wait_ns DESC) = 1
ORDER BY rank, iteration, waiting_rank;
