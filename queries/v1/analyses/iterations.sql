-- @tables gpu_busy, gpu_ops, strings
-- @macros device_layers
-- @param $device INTEGER: the device whose idle time is measured (the process's busiest)
-- @param $placed VARCHAR: name of the table of the process's ops with their iteration (placed_ops.sql, scratch.py)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Per iteration (rows of the table named $windows, made by iteration_windows.sql): wall time and what the GPU
-- did.
-- GPU work belongs to the iteration in which it was launched (the launching API call's start, or the op's own
-- start when no call was traced), whichever thread of the process launched it: PyTorch's autograd thread
-- launches the backward pass. $device: the device whose idle time is measured (the process's busiest).
WITH coll AS (  -- collective communication kernels (NCCL)
  SELECT id FROM strings WHERE value LIKE 'ncclDevKernel%' OR value LIKE 'ncclKernel%' OR value LIKE '%ncclKernel_%'
), ops AS (
  SELECT iteration, kind, start_ns, end_ns, name_id IN (SELECT id FROM coll) AS is_coll
  FROM query_table($placed)
), merged AS (
  -- prev_end: the latest end among the iteration's ops that started before this one. One sort of all ops by
  -- (iteration, start), then a running max in a streaming window (an empty OVER clause keeps its input's order,
  -- DuckDB's order-preservation rules), not a window per iteration nor one ordered window (a segment tree),
  -- which cost more CPU for the same wall time. The
  -- running max of iteration * 2^64 + end_ns up to the op before is the max end within the current iteration
  -- while it decodes to that iteration, and comes from an earlier iteration (so, no predecessor) otherwise.
  -- Ops that start together may come in any order: the union's length below is the same.
  SELECT iteration, kind, start_ns, end_ns, is_coll,
         CASE WHEN pm >= (iteration::HUGEINT << 64) - (1::HUGEINT << 63)
              THEN (pm - (iteration::HUGEINT << 64))::BIGINT END AS prev_end
  FROM (SELECT *, lag(m) OVER () AS pm
        FROM (SELECT *, max((iteration::HUGEINT << 64) + end_ns) OVER (ROWS UNBOUNDED PRECEDING) AS m
              FROM (SELECT * FROM ops ORDER BY iteration, start_ns)))
), per AS (  -- gpu_busy_ns: the length of the union (each op adds its part after the latest end of the ops
             -- started before it); the rest per kind
  SELECT iteration,
         sum(greatest(end_ns - greatest(start_ns, coalesce(prev_end, start_ns)), 0))::BIGINT AS gpu_busy_ns,
         (max(end_ns) - min(start_ns))::BIGINT AS gpu_span_ns,
         min(start_ns)::BIGINT AS gpu_start_ns,
         coalesce(sum(end_ns - start_ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_ns,
         coalesce(sum(end_ns - start_ns) FILTER (WHERE kind = 'memcpy'), 0)::BIGINT AS memcpy_ns,
         coalesce(sum(end_ns - start_ns) FILTER (WHERE kind = 'memset'), 0)::BIGINT AS memset_ns,
         coalesce(sum(end_ns - start_ns) FILTER (WHERE kind = 'graph'), 0)::BIGINT AS graph_ns,
         coalesce(sum(end_ns - start_ns) FILTER (WHERE is_coll), 0)::BIGINT AS collective_ns,
         count(*) FILTER (WHERE kind = 'kernel') AS kernels,
         count(*) AS gpu_ops
  FROM merged GROUP BY iteration
), dev_busy AS (  -- the device's busy stretches: any op (gpu_busy)
  SELECT start_ns, end_ns, busy_before_ns FROM gpu_busy WHERE device_id = $device
), layers AS (  -- and its communication and copy layers (device_layers, 46_device_layers.sql): few stretches
  SELECT layer, start_ns, end_ns, busy_before_ns FROM device_layers(coalesce($device, -1))
), w_edges AS (
  SELECT iteration, false AS is_end, start_ns AS t FROM query_table($windows)
  UNION ALL SELECT iteration, true, end_ns FROM query_table($windows)
), edges AS (  -- per layer, the time it covered before each window start and end (see gpu_busy.busy_before_ns):
               -- an ASOF join for the busy stretches, one for the layers (not one join over both: it would
               -- partition and sort the many busy stretches again)
  SELECT e.iteration, e.is_end, 'all' AS layer,
         coalesce(b.busy_before_ns + least(greatest(e.t - b.start_ns, 0), b.end_ns - b.start_ns), 0) AS busy_before
  FROM w_edges e
  ASOF LEFT JOIN dev_busy b ON e.t >= b.start_ns
  UNION ALL
  SELECT e.iteration, e.is_end, e.layer,
         coalesce(b.busy_before_ns + least(greatest(e.t - b.start_ns, 0), b.end_ns - b.start_ns), 0)
  FROM (SELECT * FROM w_edges, (VALUES ('comm'), ('comm_hidden'), ('copy'), ('copy_hidden')) l(layer)) e
  ASOF LEFT JOIN layers b ON e.layer = b.layer AND e.t >= b.start_ns
), inside AS (  -- per layer, the time it covered inside the window
  SELECT iteration, layer,
         (max(busy_before) FILTER (WHERE is_end) - max(busy_before) FILTER (WHERE NOT is_end))::BIGINT AS ns
  FROM edges GROUP BY ALL
), covered AS (
  SELECT iteration,
         max(ns) FILTER (WHERE layer = 'all') AS ns,
         max(ns) FILTER (WHERE layer = 'comm') AS comm,
         max(ns) FILTER (WHERE layer = 'comm_hidden') AS comm_hidden,
         max(ns) FILTER (WHERE layer = 'comm') - max(ns) FILTER (WHERE layer = 'comm_hidden') AS exposed,
         max(ns) FILTER (WHERE layer = 'copy') - max(ns) FILTER (WHERE layer = 'copy_hidden') AS copy_only
  FROM inside GROUP BY iteration
)
SELECT
  i.iteration,
  i.name,
  i.start_ns,
  i.end_ns,
  -- wall time of the iteration window (the range's own time for a wrapper range)
  (i.end_ns - i.start_ns)::BIGINT AS wall_ns,
  -- union of the intervals of the GPU ops launched in the iteration, across streams
  coalesce(p.gpu_busy_ns, 0) AS gpu_busy_ns,
  coalesce(p.gpu_span_ns, 0) AS gpu_span_ns,
  -- when the first GPU op launched in the iteration started (null when it launched none): the GPU's own
  -- step boundaries (iterations.py, gpu_step_ns)
  p.gpu_start_ns,
  coalesce(p.kernel_ns, 0) AS kernel_ns,
  coalesce(p.memcpy_ns, 0) AS memcpy_ns,
  coalesce(p.memset_ns, 0) AS memset_ns,
  coalesce(p.graph_ns, 0) AS graph_ns,
  -- time in collective kernels (NCCL: ncclDevKernel_*, ncclKernel_*) launched in the iteration
  coalesce(p.collective_ns, 0) AS collective_ns,
  -- the window's wall time in four parts that add up to it exactly, on the device, whoever launched the work:
  -- compute: some kernel that is not communication (or a CUDA graph replay) ran
  coalesce(c.ns - c.exposed - c.copy_only, 0)::BIGINT AS compute_ns,
  -- exposed communication: a communication kernel ran and no compute kernel
  coalesce(c.exposed, 0)::BIGINT AS exposed_comm_ns,
  -- copy: only memcpy or memset ran, no kernel
  coalesce(c.copy_only, 0)::BIGINT AS copy_ns,
  -- idle: the device ran nothing at all
  (i.end_ns - i.start_ns - coalesce(c.ns, 0))::BIGINT AS idle_ns,
  -- time in which a communication kernel ran on the device (comm_ns = overlapped_ns + exposed_comm_ns)
  coalesce(c.comm, 0)::BIGINT AS comm_ns,
  -- of it, time in which a compute kernel ran too
  coalesce(c.comm_hidden, 0)::BIGINT AS overlapped_ns,
  coalesce(p.kernels, 0) AS kernels,
  coalesce(p.gpu_ops, 0) AS gpu_ops
FROM query_table($windows) i
LEFT JOIN per p USING (iteration)
LEFT JOIN covered c USING (iteration)
ORDER BY i.iteration;
