-- Communication hidden or exposed, per device: the time in communication kernels (the union of their
-- intervals), the part of it during which a compute kernel ran on the same device (any other stream), and the
-- exposed rest, with no compute beside it. By inclusion and exclusion over the layers of kernel_layers
-- (46_kernel_layers.sql): overlapped = |comm| + |compute| - |kernels|, exposed = |kernels| - |compute|.
-- Only devices with communication kernels.
WITH t AS (
  SELECT device_id, layer, sum(end_ns - start_ns)::BIGINT AS ns FROM kernel_layers(NULL) GROUP BY ALL
), p AS (
  PIVOT t ON layer IN ('compute', 'comm', 'kernels') USING sum(ns) GROUP BY device_id
)
SELECT
  -- CUDA device id
  device_id,
  -- time in which at least one communication kernel ran, ns
  comm::BIGINT AS comm_ns,
  -- of it, time in which a compute kernel ran too, ns
  (comm + coalesce(compute, 0) - kernels)::BIGINT AS overlapped_ns,
  -- of it, time with no compute kernel beside it, ns (comm_ns = overlapped_ns + exposed_ns)
  (kernels - coalesce(compute, 0))::BIGINT AS exposed_ns,
  -- time in which at least one compute kernel (not communication) ran, ns
  coalesce(compute, 0)::BIGINT AS compute_ns
FROM p
WHERE comm IS NOT NULL
ORDER BY device_id;
