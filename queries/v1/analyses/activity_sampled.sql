-- @tables gpu_activity_periods
-- @param $device INTEGER: the device (gpu_ops.device_id)

-- Whether the export sampled SMs Active or Tensor Active on $device: iteration_activity.sql has nothing to
-- read otherwise, and is not run (its plan alone, two macros of joins, costs more than this lookup).
SELECT EXISTS (SELECT 1 FROM gpu_activity_periods WHERE device_id = $device) AS sampled;
