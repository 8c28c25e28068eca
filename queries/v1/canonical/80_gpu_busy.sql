-- nsysql canonical schema v1: when each GPU was busy.

-- Busy intervals per device: the union of all GPU ops (any kind, any stream, any process) on that device,
-- merged where they overlap or touch. Idle gaps are the spaces between consecutive rows.
CREATE OR REPLACE TABLE gpu_busy AS
WITH o AS (
  SELECT device_id, start_ns, end_ns,
         max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns, end_ns
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM gpu_ops
), g AS (
  SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY device_id ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS grp
  FROM o
)
SELECT
  -- CUDA device id
  device_id,
  -- start of a stretch in which the device always ran at least one op, ns
  start_ns,
  -- end of that stretch, ns
  end_ns,
  -- busy time on this device before start_ns (sum of the earlier stretches), ns: the busy time inside any
  -- window [a, b) is B(b) - B(a), with B(t) = busy_before_ns + clamp(t - start_ns, 0, end_ns - start_ns) of
  -- the last stretch starting at or before t (an ASOF join)
  (coalesce(sum(end_ns - start_ns) OVER (PARTITION BY device_id ORDER BY start_ns
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::BIGINT
    AS busy_before_ns
FROM (SELECT device_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM g GROUP BY device_id, grp)
ORDER BY device_id, start_ns;
