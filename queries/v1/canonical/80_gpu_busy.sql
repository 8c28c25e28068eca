-- @include 00_macros.sql
-- @staging raw_graph, raw_kernel, raw_memcpy, raw_memset
-- @macros is_interval, union_stretches
-- @defines gpu_busy
-- @empty_without raw_graph, raw_kernel, raw_memcpy, raw_memset

-- nsysql canonical schema v1: when each GPU was busy.

-- Busy intervals per device: the union of all GPU ops (any kind, any stream, any process) on that device,
-- merged where they overlap or touch (union_stretches, 00_macros.sql). Idle gaps are the spaces between
-- consecutive stretches of a device (each row's prev_end_ns to its start_ns). ORDER BY device_id, start_ns to
-- list them.
CREATE OR REPLACE TABLE gpu_busy AS
WITH ops AS NOT MATERIALIZED (  -- the ops of gpu_ops (40_gpu_ops.sql), read from the staging tables so that
  -- this file need not wait for gpu_ops and its join with the API calls (it runs beside them, off a cold load's
  -- longest chain of files): the same intervals (gpu_ops drops duplicate rows of an op, which cannot change a
  -- union). Not materialized: union_stretches reads it three times, and three scans of three columns cost less
  -- than a copy of them
  SELECT * FROM (
    SELECT deviceId AS key, start AS start_ns, "end" AS end_ns FROM raw_kernel
    UNION ALL SELECT deviceId, start, "end" FROM raw_memcpy
    UNION ALL SELECT deviceId, start, "end" FROM raw_memset
    UNION ALL SELECT deviceId, start, "end" FROM raw_graph)
  WHERE is_interval(start_ns, end_ns) AND key IS NOT NULL
)
SELECT
  -- CUDA device id
  key AS device_id,
  -- start of a stretch in which the device always ran at least one op, ns
  start_ns,
  -- end of that stretch, ns
  end_ns,
  -- busy time on this device before start_ns (sum of the earlier stretches), ns: the busy time inside any
  -- window [a, b) is B(b) - B(a), with B(t) = busy_before_ns + clamp(t - start_ns, 0, end_ns - start_ns) of
  -- the last stretch starting at or before t (an ASOF join)
  busy_before_ns,
  -- end of the previous stretch on this device, ns (NULL for the first): the device sat idle from
  -- prev_end_ns to start_ns
  prev_end_ns
FROM union_stretches(ops);
