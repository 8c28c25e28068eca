-- @tables api_calls, strings
-- @macros api_display_name, stats_durations
-- @param $top BIGINT: row limit, NULL for all

-- CUDA API calls: per function, the same quantity as `nsys stats -r cuda_api_sum` (CPU time inside the calls,
-- every thread of every process). Names as nsys prints them (api_display_name, 00_macros.sql).
-- $top: row limit, NULL for all.
-- A call recorded twice is counted once: nsys's CUDA backtraces (`--cudabacktrace`) are written as a second row of
-- the call they were taken for, with the same process, thread, correlation id and function (its name without the
-- version suffix), enclosing the call; the enclosing row is left out, the call itself counts. CUPTI gives every
-- call of a process its own correlation id, so only those rows share one (and the driver call a runtime call
-- makes under its id, of another name, which counts).
WITH shared AS (  -- (pid, correlation_id) of more than one call: none, as a rule
  SELECT pid, correlation_id FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY ALL HAVING count(*) > 1
), twice AS (
  SELECT a.call_id, a.pid, a.tid, a.correlation_id, a.start_ns, a.end_ns, api_display_name(s.value) AS name
  FROM api_calls a SEMI JOIN shared USING (pid, correlation_id)
  LEFT JOIN strings s ON s.id = a.name_id
), backtraces AS (
  SELECT DISTINCT o.call_id FROM twice o JOIN twice i USING (pid, tid, correlation_id, name)
  WHERE i.call_id <> o.call_id AND o.start_ns <= i.start_ns AND o.end_ns >= i.end_ns
    -- of two rows of one span, the later written is left out
    AND (o.start_ns < i.start_ns OR o.end_ns > i.end_ns OR o.call_id > i.call_id)
), c AS (
  SELECT api_display_name(s.value) AS name,
         a.end_ns - a.start_ns AS d
  FROM api_calls a
  LEFT JOIN strings s ON s.id = a.name_id
  ANTI JOIN backtraces b ON b.call_id = a.call_id
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
