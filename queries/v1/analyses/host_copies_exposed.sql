-- @param $device_id BIGINT: only this device; NULL: every device
-- @macros device_layers

-- Per device that ran copies between host and device memory: the time in which at least one of them ran
-- (device_layers' `host_copy` layer, 46_device_layers.sql) and the part of it in which no kernel (nor CUDA graph
-- replay) ran beside them, ns. It reads every kernel of the device: the transfer-bound finding asks it only of the
-- devices host_copies.sql makes it about.
SELECT
  -- CUDA device id
  device_id,
  -- time in which at least one such copy ran on the device, ns
  coalesce(sum(end_ns - start_ns) FILTER (WHERE layer = 'host_copy'), 0)::BIGINT AS filled_ns,
  -- of it, time with no kernel beside them, ns
  (coalesce(sum(end_ns - start_ns) FILTER (WHERE layer = 'host_copy'), 0)
    - coalesce(sum(end_ns - start_ns) FILTER (WHERE layer = 'host_copy_hidden'), 0))::BIGINT AS exposed_ns
FROM device_layers($device_id)
WHERE layer IN ('host_copy', 'host_copy_hidden')
GROUP BY device_id
ORDER BY device_id;
