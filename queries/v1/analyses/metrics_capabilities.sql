-- @tables devices, gpu_ops

-- The compute capability of each GPU that ran GPU work (`major.minor`, NULL where the export does not say): an
-- export without GPU metrics is told whether nsys could have sampled them there (metrics.py).
SELECT DISTINCT d.device_id, d.compute_capability
FROM devices d
WHERE d.device_id IN (SELECT DISTINCT device_id FROM gpu_ops)
ORDER BY d.device_id;
