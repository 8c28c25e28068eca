-- @tables gpu_busy
-- @param $device INTEGER: the device (gpu_ops.device_id)

-- Active span of one device (first op start to last op end), ns.
SELECT min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM gpu_busy WHERE device_id = $device;
