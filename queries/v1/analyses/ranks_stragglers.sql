-- Stragglers (rule in nsysql/analyses/ranks.py): rank r in iteration i when its GPU idle time exceeds its own
-- steady-state median by >= max($min_excess, $excess_share x the median steady iteration time of all ranks),
-- and another rank's collective time exceeds its own median, in i or i+1, by >= $wait_share x that excess.
WITH base AS (
  SELECT rank, median(idle_ns) AS idle_med, median(collective_ns) AS coll_med
  FROM rank_iterations WHERE NOT warmup GROUP BY rank
), threshold AS (
  SELECT greatest($min_excess, $excess_share * median(cpu_ns)) AS t FROM rank_iterations WHERE NOT warmup
), x AS (
  SELECT i.rank, i.iteration, i.idle_ns - b.idle_med AS excess_idle_ns, i.collective_ns - b.coll_med AS excess_coll_ns,
         i.top_cause, i.os_call, i.cpu_ns
  FROM rank_iterations i JOIN base b USING (rank)
  WHERE NOT i.warmup
), late AS (
  SELECT x.* FROM x, threshold WHERE x.excess_idle_ns >= threshold.t
), waits AS (
  SELECT l.rank, l.iteration, l.excess_idle_ns, l.top_cause, l.os_call, o.rank AS waiting_rank,
         o.iteration - l.iteration AS wait_lag, o.excess_coll_ns AS wait_ns
  FROM late l JOIN x o
    ON o.rank <> l.rank AND o.iteration IN (l.iteration, l.iteration + 1)
   AND o.excess_coll_ns >= $wait_share * l.excess_idle_ns
)
SELECT rank, iteration, excess_idle_ns, top_cause, os_call, waiting_rank, wait_lag, wait_ns
FROM waits
QUALIFY row_number() OVER (PARTITION BY rank, iteration, waiting_rank ORDER BY wait_ns DESC) = 1
ORDER BY rank, iteration, waiting_rank;
