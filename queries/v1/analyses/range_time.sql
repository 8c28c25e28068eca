-- @tables nvtx_ranges
-- @param $names VARCHAR[]: the range names
-- @param $pids BIGINT[]: the processes whose ranges count (those that own a GPU: whose idle time gaps explains)

-- Wall time inside instances of the named ranges, ns: per process the length of the union of their instances
-- (an instance nested in or overlapping another, when $names holds a range and its children, adds only the time
-- no other instance covered, as gaps.sql counts each idle stretch once), summed over the processes $pids. A
-- process without GPU work has no idle GPU time inside its ranges, so its instances are no part of the span.
SELECT sum(end_ns - start_ns)::BIGINT AS ns
FROM (SELECT pid, min(start_ns) AS start_ns, max(end_ns) AS end_ns
      FROM (SELECT *, sum(CASE WHEN start_ns < reach THEN 0 ELSE 1 END) OVER (PARTITION BY pid ORDER BY start_ns, end_ns
                          ROWS UNBOUNDED PRECEDING) AS island
            FROM (SELECT pid, start_ns, end_ns,
                         max(end_ns) OVER (PARTITION BY pid ORDER BY start_ns, end_ns
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
                  FROM nvtx_ranges WHERE list_contains($names, name) AND list_contains($pids, pid)))
      GROUP BY pid, island);
