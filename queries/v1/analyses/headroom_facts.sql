-- @tables devices, gpu_activity_names, gpu_ops, kernel_classes, kernel_tensor_use
-- @macros kernel_tensor_cores
-- @param $matrix VARCHAR[]: the kernel categories that multiply matrices
-- @param $min_bytes BIGINT: the fewest bytes of pageable copies that count

-- What the headroom of two findings needs from the whole profile (nsysql/analyses/headroom.py), one row:
-- the measured rate of pinned host-to-device copies, and the compute capability of the GPUs that ran matrix
-- kernels on CUDA cores.
WITH pinned AS (  -- copies of at least $min_bytes each: smaller ones measure the copy's latency, not its rate
  SELECT coalesce(sum(bytes), 0)::BIGINT AS bytes, coalesce(sum(duration_ns), 0)::BIGINT AS ns, count(*) AS copies
  FROM gpu_ops
  WHERE kind = 'memcpy' AND copy_kind = 'Host-to-Device' AND src_kind = 'Pinned' AND bytes >= $min_bytes
), simt_devices AS (
  SELECT DISTINCT o.device_id
  FROM gpu_ops o
  JOIN kernel_classes c ON c.name_id = o.name_id
  LEFT JOIN kernel_tensor_use u ON u.name_id = o.name_id
  WHERE o.kind = 'kernel' AND list_contains($matrix, c.category)
    AND kernel_tensor_cores(u.measured, c.tensor_cores) = 'no'
), caps AS (
  SELECT d.device_id, d.compute_capability,
         try_cast(split_part(d.compute_capability, '.', 1) AS INTEGER) * 10
           + coalesce(try_cast(split_part(d.compute_capability, '.', 2) AS INTEGER), 0) AS cc
  FROM simt_devices s LEFT JOIN devices d ON d.device_id = s.device_id
)
SELECT
  -- pinned host-to-device copies of at least $min_bytes: how many, their bytes and GPU time
  p.copies AS pinned_copies,
  p.bytes AS pinned_bytes,
  p.ns AS pinned_ns,
  -- devices that ran matrix kernels on CUDA cores, how many of them say their compute capability, and the
  -- lowest and highest (major * 10 + minor, e.g. 80 for 8.0)
  (SELECT count(*) FROM caps) AS simt_devices,
  (SELECT count(cc) FROM caps) AS simt_devices_known,
  -- of those that do not say it, how many nsys sampled a tensor counter on: Turing (sm_75) or later, so with
  -- tensor cores, whatever their compute capability
  (SELECT count(*) FROM caps WHERE cc IS NULL
     AND device_id IN (SELECT device_id FROM gpu_activity_names WHERE tensor)) AS simt_unknown_sampled,
  (SELECT min(cc) FROM caps) AS simt_cc_min,
  (SELECT max(cc) FROM caps) AS simt_cc_max
FROM pinned p;
