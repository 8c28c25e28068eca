-- @tables gpu_ops, kernel_classes

-- Whether any communication kernel (category `communication`, 44_kernel_rules.sql) covers time on a device: the
-- kernels overlap.sql measures (device_layers' `comm` layer), read without measuring them.
SELECT EXISTS (
  SELECT 1 FROM gpu_ops
  WHERE device_id IS NOT NULL AND end_ns > start_ns AND kind = 'kernel'
    AND name_id IN (SELECT name_id FROM kernel_classes WHERE category = 'communication')
) AS comm;
