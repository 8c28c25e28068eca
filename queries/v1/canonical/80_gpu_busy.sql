-- nsysql canonical schema v1: when each GPU was busy.
-- gpu_busy is written unsorted: sorting it cost 12% of this file's time, and every reader filters, aggregates
-- or ASOF-joins it, which sorts anyway.

-- Busy intervals per device: the union of all GPU ops (any kind, any stream, any process) on that device,
-- merged where they overlap or touch. Idle gaps are the spaces between consecutive stretches of a device (each
-- row's prev_end_ns to its start_ns). Stored in no particular order: ORDER BY device_id, start_ns to list them.
CREATE OR REPLACE TABLE gpu_busy AS
WITH ops AS (  -- the ops of gpu_ops (40_gpu_ops.sql), read from the staging tables so that this file need not
               -- wait for gpu_ops and its join with the API calls: the same intervals (gpu_ops drops duplicate
               -- rows of an op, which cannot change a union)
  SELECT deviceId AS device_id, start AS start_ns, "end" AS end_ns FROM raw_kernel
  UNION ALL SELECT deviceId, start, "end" FROM raw_memcpy
  UNION ALL SELECT deviceId, start, "end" FROM raw_memset
  UNION ALL SELECT deviceId, start, "end" FROM raw_graph
), o AS (  -- each op with the latest end among the ops that started before it (in start order; ops that
            -- start together may come in any order: one of them starts the stretch, with the same prev_end,
            -- whichever it is, and the others follow it within the stretch, so the table is the same)
  SELECT device_id, start_ns, end_ns,
         max(end_ns) OVER (PARTITION BY device_id ORDER BY start_ns
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM ops WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL
), s AS (  -- ops that start a stretch: every earlier op has ended before they start. Their prev_end is the
           -- end of the stretch before (NULL for the first)
  SELECT device_id, start_ns, prev_end FROM o WHERE prev_end IS NULL OR start_ns > prev_end
), last AS (
  SELECT device_id, max(end_ns) AS end_ns FROM o GROUP BY device_id
), w AS (  -- one window (one sort) for the stretch's end and the busy time before it: with e_k, s_k the end
           -- and start of stretch k, e_k is the prev_end of stretch k + 1, so the busy time before stretch j,
           -- sum(e_k - s_k, k < j), is s_j + sum(prev_end_k - s_k, k <= j) (prev_end_1 taken as 0): one
           -- running sum
  SELECT device_id, start_ns, prev_end,
         lead(prev_end) OVER d AS next_prev_end,
         start_ns + sum(coalesce(prev_end, 0) - start_ns) OVER (d ROWS UNBOUNDED PRECEDING) AS busy_before
  FROM s
  WINDOW d AS (PARTITION BY device_id ORDER BY start_ns)
)
SELECT
  -- CUDA device id
  w.device_id,
  -- start of a stretch in which the device always ran at least one op, ns
  w.start_ns,
  -- end of that stretch, ns
  coalesce(w.next_prev_end, l.end_ns) AS end_ns,
  -- busy time on this device before start_ns (sum of the earlier stretches), ns: the busy time inside any
  -- window [a, b) is B(b) - B(a), with B(t) = busy_before_ns + clamp(t - start_ns, 0, end_ns - start_ns) of
  -- the last stretch starting at or before t (an ASOF join)
  w.busy_before::BIGINT AS busy_before_ns,
  -- end of the previous stretch on this device, ns (NULL for the first): the device sat idle from
  -- prev_end_ns to start_ns
  w.prev_end AS prev_end_ns
FROM w JOIN last l USING (device_id);
