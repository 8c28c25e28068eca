-- @tables gpu_busy
-- @macros device_layers

-- Communication hidden or exposed, per device: the time in communication kernels (the union of their
-- intervals), the part of it during which a compute kernel ran on the same device (any other stream), and the
-- exposed rest, with no compute beside it; from the layers of device_layers (46_device_layers.sql) and the
-- device's busy time (gpu_busy): compute = busy - exposed communication - copy only. Only devices with
-- communication kernels.
WITH l AS (
  SELECT device_id, layer, sum(end_ns - start_ns) AS ns FROM device_layers(NULL) GROUP BY ALL
), p AS (
  PIVOT l ON layer IN ('comm', 'comm_hidden', 'copy', 'copy_hidden') USING sum(ns) GROUP BY device_id
), busy AS (
  SELECT device_id, sum(end_ns - start_ns) AS ns FROM gpu_busy GROUP BY device_id
)
SELECT
  -- CUDA device id
  p.device_id,
  -- time in which at least one communication kernel ran, ns
  p.comm::BIGINT AS comm_ns,
  -- of it, time in which a compute kernel ran too, ns
  coalesce(p.comm_hidden, 0)::BIGINT AS overlapped_ns,
  -- of it, time with no compute kernel beside it, ns (comm_ns = overlapped_ns + exposed_ns)
  (p.comm - coalesce(p.comm_hidden, 0))::BIGINT AS exposed_ns,
  -- time in which at least one compute kernel (not communication) ran, ns
  (b.ns - (p.comm - coalesce(p.comm_hidden, 0)) - coalesce(p.copy - coalesce(p.copy_hidden, 0), 0))::BIGINT
    AS compute_ns
FROM p
JOIN busy b USING (device_id)
WHERE p.comm IS NOT NULL
ORDER BY p.device_id;
