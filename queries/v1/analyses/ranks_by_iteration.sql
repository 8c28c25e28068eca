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
         -- ranks in increasing collective time: the first arrived last
         row_number() OVER (PARTITION BY iteration ORDER BY collective_ns, rank) AS cpos,
         count(*) OVER (PARTITION BY iteration) AS ranks
  FROM rank_iterations
), per AS (
  SELECT
    iteration,
    any_value(ranks) AS ranks,
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
  -- NULL where it cannot be told: one rank, no collective kernel in the iteration, or two ranks tied for least
  CASE WHEN ranks > 1 AND coalesce(max_collective_ns, 0) > 0 AND last_collective_ns < next_collective_ns
       THEN last_rank END AS waited_for_rank,
  -- the median of the other ranks' collective time minus the last rank's: how long they waited for it
  CASE WHEN ranks > 1 AND coalesce(max_collective_ns, 0) > 0 AND last_collective_ns < next_collective_ns
       THEN others_collective_ns - last_collective_ns END AS others_waited_ns,
  longest_step_rank,
  longest_step_ns,
  others_median_step_ns,
  longest_step_ns - others_median_step_ns AS longer_by_ns,
  max_collective_ns,
  min_collective_ns
FROM per
ORDER BY iteration;
