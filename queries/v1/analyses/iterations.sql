-- Per iteration (rows of _iterations, made by iteration_windows.sql): wall time and what the GPU did.
-- GPU work belongs to the iteration in which it was launched (the launching API call's start, or the op's own
-- start when no call was traced), whichever thread of the process launched it: PyTorch's autograd thread
-- launches the backward pass. $device: the device whose idle time is measured (the process's busiest).
WITH coll AS (  -- collective communication kernels (NCCL)
  SELECT id FROM strings WHERE value LIKE 'ncclDevKernel%' OR value LIKE 'ncclKernel%' OR value LIKE '%ncclKernel_%'
), ops AS (
  SELECT i.iteration, o.kind, o.start_ns, o.end_ns, o.duration_ns, o.name_id IN (SELECT id FROM coll) AS is_coll
  FROM (SELECT *, coalesce(api_start_ns, start_ns) AS t FROM gpu_ops WHERE pid = $pid) o
  ASOF JOIN _iterations i ON o.t >= i.start_ns
  WHERE o.t < i.end_ns
), merged AS (
  SELECT iteration, start_ns, end_ns,
         max(end_ns) OVER (PARTITION BY iteration ORDER BY start_ns, end_ns
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
  FROM ops
), grouped AS (
  SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY iteration ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS grp
  FROM merged
), busy AS (
  SELECT iteration, sum(e - s)::BIGINT AS gpu_busy_ns
  FROM (SELECT iteration, grp, min(start_ns) AS s, max(end_ns) AS e FROM grouped GROUP BY ALL)
  GROUP BY iteration
), per AS (
  SELECT iteration,
         (max(end_ns) - min(start_ns))::BIGINT AS gpu_span_ns,
         coalesce(sum(duration_ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_ns,
         coalesce(sum(duration_ns) FILTER (WHERE kind = 'memcpy'), 0)::BIGINT AS memcpy_ns,
         coalesce(sum(duration_ns) FILTER (WHERE kind = 'memset'), 0)::BIGINT AS memset_ns,
         coalesce(sum(duration_ns) FILTER (WHERE kind = 'graph'), 0)::BIGINT AS graph_ns,
         coalesce(sum(duration_ns) FILTER (WHERE is_coll), 0)::BIGINT AS collective_ns,
         count(*) FILTER (WHERE kind = 'kernel') AS kernels,
         count(*) AS gpu_ops
  FROM ops GROUP BY iteration
), dev_busy AS (
  SELECT start_ns, end_ns, busy_before_ns FROM gpu_busy WHERE device_id = $device
), b_start AS (  -- device busy time before each window start (see gpu_busy.busy_before_ns)
  SELECT i.iteration,
         coalesce(b.busy_before_ns + least(greatest(i.start_ns - b.start_ns, 0), b.end_ns - b.start_ns), 0) AS t
  FROM _iterations i ASOF LEFT JOIN dev_busy b ON i.start_ns >= b.start_ns
), b_end AS (
  SELECT i.iteration,
         coalesce(b.busy_before_ns + least(greatest(i.end_ns - b.start_ns, 0), b.end_ns - b.start_ns), 0) AS t
  FROM _iterations i ASOF LEFT JOIN dev_busy b ON i.end_ns >= b.start_ns
), covered AS (
  SELECT e.iteration, (e.t - s.t)::BIGINT AS ns FROM b_end e JOIN b_start s USING (iteration)
)
SELECT
  i.iteration,
  i.name,
  i.start_ns,
  i.end_ns,
  -- wall time of the iteration window (the range's own time for a wrapper range)
  (i.end_ns - i.start_ns)::BIGINT AS cpu_ns,
  -- union of the intervals of the GPU ops launched in the iteration, across streams
  coalesce(b.gpu_busy_ns, 0) AS gpu_busy_ns,
  coalesce(p.gpu_span_ns, 0) AS gpu_span_ns,
  coalesce(p.kernel_ns, 0) AS kernel_ns,
  coalesce(p.memcpy_ns, 0) AS memcpy_ns,
  coalesce(p.memset_ns, 0) AS memset_ns,
  coalesce(p.graph_ns, 0) AS graph_ns,
  -- time in collective kernels (NCCL: ncclDevKernel_*, ncclKernel_*) launched in the iteration
  coalesce(p.collective_ns, 0) AS collective_ns,
  -- time inside the window when the device ran nothing at all
  (i.end_ns - i.start_ns - coalesce(c.ns, 0))::BIGINT AS idle_ns,
  coalesce(p.kernels, 0) AS kernels,
  coalesce(p.gpu_ops, 0) AS gpu_ops
FROM _iterations i
LEFT JOIN busy b USING (iteration)
LEFT JOIN per p USING (iteration)
LEFT JOIN covered c USING (iteration)
ORDER BY i.iteration;
