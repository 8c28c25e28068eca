-- nsysql canonical schema v1: when each GPU was busy.
--
-- How (one sort, then passes in that order): the ops sorted by device and start feed windows with an empty
-- OVER (), which DuckDB computes as one streaming pass each, in the order of their input (DuckDB's
-- order-preservation rules: a window with an empty OVER clause keeps its input's order). Per-device windows
-- would sort the ops once per window and take the running maximum through a segment tree, at more CPU.
-- A window over all devices at once keeps
-- each device apart by carrying the device in the high 64 bits of a HUGEINT (a later device's values always
-- compare higher). Should DuckDB ever hand the passes their input out of order, the load fails (error() below)
-- instead of storing wrong stretches.

-- Busy intervals per device: the union of all GPU ops (any kind, any stream, any process) on that device,
-- merged where they overlap or touch. Idle gaps are the spaces between consecutive stretches of a device (each
-- row's prev_end_ns to its start_ns). ORDER BY device_id, start_ns to list them.
CREATE OR REPLACE TABLE gpu_busy AS
WITH ops AS (  -- the ops of gpu_ops (40_gpu_ops.sql), read from the staging tables so that this file need not
               -- wait for gpu_ops and its join with the API calls: the same intervals (gpu_ops drops duplicate
               -- rows of an op, which cannot change a union)
  SELECT * FROM (
    SELECT deviceId AS device_id, start AS start_ns, "end" AS end_ns FROM raw_kernel
    UNION ALL SELECT deviceId, start, "end" FROM raw_memcpy
    UNION ALL SELECT deviceId, start, "end" FROM raw_memset
    UNION ALL SELECT deviceId, start, "end" FROM raw_graph)
  WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL AND end_ns >= start_ns AND device_id IS NOT NULL
), sorted AS (  -- plus one sentinel op per device that starts after all others (and has no end): it starts the
                -- stretch after the device's last, so that every real stretch has a successor (below)
  SELECT device_id, start_ns, end_ns FROM ops
  UNION ALL
  SELECT DISTINCT device_id, 9223372036854775807, NULL FROM ops
  ORDER BY device_id, start_ns
), upto AS (  -- the latest end among the device's ops up to this one (in the high bits: the device)
  SELECT device_id, start_ns, max((device_id::HUGEINT << 64) + end_ns) OVER (ROWS UNBOUNDED PRECEDING) AS m
  FROM sorted
), before AS (  -- the same among the ops before this one, and the previous op's place in the order
  SELECT device_id, start_ns, lag(m) OVER () AS pm, lag(device_id) OVER () AS p_dev, lag(start_ns) OVER () AS p_start
  FROM upto
), starts AS (  -- ops that start a stretch: every earlier op of the device has ended before they start. prev_end:
                -- the end of the stretch before (NULL for the device's first). Ops that start together may come
                -- in any order: one of them starts the stretch, with the same prev_end, whichever it is
  SELECT device_id, start_ns, prev_end FROM (
    SELECT device_id, start_ns,
           CASE WHEN pm >= (device_id::HUGEINT << 64) - (1::HUGEINT << 63)
                THEN (pm - (device_id::HUGEINT << 64))::BIGINT END AS prev_end,
           CASE WHEN p_dev > device_id OR (p_dev = device_id AND p_start > start_ns)
                THEN error('gpu_busy: DuckDB passed the ops out of order') END AS out_of_order
    FROM before)
  WHERE prev_end IS NULL OR start_ns > prev_end OR out_of_order IS NOT NULL
), stretches AS (  -- each stretch start, with the stretch before it: that one runs from its start to this one's
                   -- prev_end (when it is of the same device)
  SELECT device_id, prev_end, lag(device_id) OVER () AS p_dev, lag(start_ns) OVER () AS p_start,
         lag(prev_end) OVER () AS p_prev_end
  FROM starts
), summed AS (  -- total length of the stretches listed so far (all devices)
  SELECT *, sum(CASE WHEN p_dev = device_id THEN prev_end - p_start ELSE 0 END) OVER (ROWS UNBOUNDED PRECEDING) AS total
  FROM stretches
), offset_ AS (  -- that total at the device's first stretch start, where its own stretches begin to count (in the
                 -- high bits: the device; the total is shifted by 2^63 into the low 64 bits' unsigned range)
  SELECT *, max(CASE WHEN p_dev IS DISTINCT FROM device_id
                     THEN (device_id::HUGEINT << 64) + total + (1::HUGEINT << 63) END)
              OVER (ROWS UNBOUNDED PRECEDING) - (device_id::HUGEINT << 64) - (1::HUGEINT << 63) AS device_total
  FROM summed
)
SELECT
  -- CUDA device id
  device_id,
  -- start of a stretch in which the device always ran at least one op, ns
  p_start AS start_ns,
  -- end of that stretch, ns
  prev_end AS end_ns,
  -- busy time on this device before start_ns (sum of the earlier stretches), ns: the busy time inside any
  -- window [a, b) is B(b) - B(a), with B(t) = busy_before_ns + clamp(t - start_ns, 0, end_ns - start_ns) of
  -- the last stretch starting at or before t (an ASOF join)
  (total - (prev_end - p_start) - device_total)::BIGINT AS busy_before_ns,
  -- end of the previous stretch on this device, ns (NULL for the first): the device sat idle from
  -- prev_end_ns to start_ns
  p_prev_end AS prev_end_ns
FROM offset_
WHERE p_dev = device_id;
