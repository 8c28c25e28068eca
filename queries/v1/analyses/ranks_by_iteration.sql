-- @frames rank_iterations

-- Per iteration index across ranks: the rank the others waited for, and the rank with the longest step.
-- In a data-parallel step every rank's collectives end together, when the last rank has joined them, so a
-- rank's collective kernel time is its own transfer plus its wait for the last one: the rank with the least
-- collective time arrived last, and the others' extra collective time is how long they waited for it. The
-- longest step (the iteration range on the CPU clock) is another measure: a rank that waited inside a
-- collective can have the longest next step (its CPU blocks behind the collective), so it names the rank that
-- waited as often as the one waited for, and is labelled only as the longest step.
WITH ranked AS (
  SELECT iteration, rank, wall_ns, collective_ns, warmup,
         row_number() OVER (PARTITION BY iteration ORDER BY wall_ns DESC, rank) AS pos,
         -- ranks that ran a collective kernel, in increasing collective time: the first arrived last (a rank
         -- without one took no part in the iteration's collectives, so no one waited for it there)
         CASE WHEN collective_ns > 0 THEN row_number() OVER (
           PARTITION BY iteration, collective_ns > 0 ORDER BY collective_ns, rank) END AS cpos,
         count(*) FILTER (WHERE collective_ns > 0) OVER (PARTITION BY iteration) AS joined,
         count(*) OVER (PARTITION BY iteration) AS ranks
  FROM rank_iterations
), per AS (
  SELECT
    iteration,
    any_value(ranks) AS ranks,
    any_value(joined) AS joined,
    bool_or(warmup) AS warmup,
    max(rank) FILTER (WHERE cpos = 1) AS last_rank,
    max(collective_ns) FILTER (WHERE cpos = 1) AS last_collective_ns,
    max(collective_ns) FILTER (WHERE cpos = 2) AS next_collective_ns,
    median(collective_ns) FILTER (WHERE cpos > 1) AS others_collective_ns,
    max(rank) FILTER (WHERE pos = 1) AS longest_step_rank,
    max(wall_ns) FILTER (WHERE pos = 1) AS longest_step_ns,
    median(wall_ns) FILTER (WHERE pos > 1) AS others_median_step_ns,
    max(collective_ns) AS max_collective_ns,
    min(collective_ns) AS min_collective_ns
  FROM ranked
  GROUP BY iteration
)
SELECT
  iteration,
  ranks,
  warmup,
  -- NULL where it cannot be told: fewer than two ranks ran a collective kernel in the iteration, or two tie
  CASE WHEN joined > 1 AND last_collective_ns < next_collective_ns THEN last_rank END AS waited_for_rank,
  -- the median of the other ranks' collective time minus the last rank's: how long they waited for it
  CASE WHEN joined > 1 AND last_collective_ns < next_collective_ns
       THEN others_collective_ns - last_collective_ns END AS others_waited_ns,
  longest_step_rank,
  longest_step_ns,
  others_median_step_ns,
  longest_step_ns - others_median_step_ns AS longer_by_ns,
  max_collective_ns,
  min_collective_ns
FROM per
ORDER BY iteration;
