-- @param $device_id BIGINT: only this device (the loop's, findings.py); NULL: every device
-- @tables gpu_activity_names

-- The names of the SMs Active and Tensor Active metrics each device sampled (gpu_activity_names), one row each:
-- what a sentence about them calls them. Turing's tensor counter is `Tensor Active / FP16 Active`, which counts
-- the half-precision pipe with the tensor cores: said as `Tensor Active` it would claim tensor-core work that
-- fp16 math off the tensor cores reads as well. Empty without GPU metrics.
SELECT device_id, tensor, metric
FROM gpu_activity_names
WHERE $device_id IS NULL OR device_id = $device_id
ORDER BY device_id, tensor;
