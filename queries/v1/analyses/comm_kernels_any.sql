-- @tables gpu_ops, kernel_classes

-- Whether any communication kernel (category `communication`, 44_kernel_rules.sql) covers time on a device: the
-- kernels overlap.sql measures (device_layers' `comm` layer), read without measuring them; and whether any GPU op
-- was recorded at all (without one, the absence of communication kernels is no evidence).
SELECT EXISTS (
  SELECT 1 FROM gpu_ops
  WHERE device_id IS NOT NULL AND end_ns > start_ns AND kind = 'kernel'
    AND name_id IN (SELECT name_id FROM kernel_classes WHERE category = 'communication')
) AS comm, EXISTS (SELECT 1 FROM gpu_ops) AS traced;
