-- @param $device_id BIGINT: only this device (the loop's, findings.py); NULL: every device
-- @tables gpu_busy, gpu_ops
-- @macros is_host_copy, union_stretches

-- Copies between host and device memory (is_host_copy, 00_macros.sql: they cross the bus), per device that ran
-- any: how many, their bytes and GPU time, what kind of host memory they read or wrote, the time they filled on
-- the device (the union of their intervals) and the device's busy time (gpu_busy: any op), which that time is a
-- share of. The part of it with no kernel beside it is host_copies_exposed.sql's: it reads every kernel, and the
-- finding asks it only where these figures make one.
WITH c_ops AS (
  SELECT * FROM gpu_ops
  WHERE is_host_copy(kind, copy_kind) AND device_id IS NOT NULL AND ($device_id IS NULL OR device_id = $device_id)
), c AS (
  SELECT device_id, copy_kind, bytes, duration_ns,
         -- the host side: the source of a copy from the host, the destination of one to it
         CASE WHEN copy_kind::VARCHAR LIKE 'Host-to-%' THEN src_kind ELSE dst_kind END AS host_kind
  FROM c_ops
), per AS (
  SELECT device_id,
         count(*) AS copies,
         count(*) FILTER (WHERE copy_kind::VARCHAR LIKE 'Host-to-%') AS to_device,
         coalesce(sum(bytes), 0) AS bytes,
         coalesce(sum(duration_ns), 0) AS ns,
         coalesce(sum(bytes) FILTER (WHERE host_kind = 'Pinned'), 0) AS pinned_bytes,
         coalesce(sum(bytes) FILTER (WHERE host_kind = 'Pageable'), 0) AS pageable_bytes
  FROM c GROUP BY device_id
), spans AS (
  SELECT device_id AS key, start_ns, end_ns FROM c_ops
), l AS (
  SELECT key AS device_id, sum(end_ns - start_ns) AS filled FROM union_stretches(spans) GROUP BY key
), busy AS (
  SELECT device_id, sum(end_ns - start_ns) AS ns FROM gpu_busy GROUP BY device_id
)
SELECT
  -- CUDA device id
  per.device_id,
  -- copies between host and device memory, and of them those from the host
  per.copies,
  per.to_device,
  -- their bytes and GPU time (the sum of their durations), ns
  per.bytes::BIGINT AS bytes,
  per.ns::BIGINT AS copy_ns,
  -- their bytes from or to pinned host memory, and pageable (the rest: a memory kind the export does not say)
  per.pinned_bytes::BIGINT AS pinned_bytes,
  per.pageable_bytes::BIGINT AS pageable_bytes,
  -- time in which at least one of them ran on the device, ns
  coalesce(l.filled, 0)::BIGINT AS filled_ns,
  -- time in which the device ran any op, ns
  coalesce(busy.ns, 0)::BIGINT AS busy_ns
FROM per
LEFT JOIN l USING (device_id)
LEFT JOIN busy USING (device_id)
ORDER BY per.device_id;
