-- nsysql canonical schema v1: when each GPU was busy.

-- Busy intervals per device: the union of all GPU ops (any kind, any stream, any process) on that device,
-- merged where they overlap or touch. Idle gaps are the spaces between consecutive rows.
CREATE OR REPLACE TABLE gpu_busy AS
WITH o AS (  -- each op with the latest end among the ops that started before it (in start order)
  SELECT device_id, start_ns, end_ns,
         max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns, end_ns
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM gpu_ops
), s AS (  -- ops that start a stretch: every earlier op has ended before they start
  SELECT device_id, start_ns, prev_end FROM o WHERE prev_end IS NULL OR start_ns > prev_end
), last AS (
  SELECT device_id, max(end_ns) AS end_ns FROM gpu_ops GROUP BY device_id
), stretches AS (  -- a stretch ends where the next one's first op finds everything before it ended
  SELECT s.device_id, s.start_ns,
         coalesce(lead(s.prev_end) OVER (PARTITION BY s.device_id ORDER BY s.start_ns), l.end_ns) AS end_ns
  FROM s JOIN last l USING (device_id)
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
FROM stretches
ORDER BY device_id, start_ns;
