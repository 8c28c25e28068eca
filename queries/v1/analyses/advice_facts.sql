-- @param $device_id BIGINT: only this device (the loop's, findings.py); NULL: every device that ran kernels
-- @tables devices, gpu_ops, profile_facts

-- What the findings' advice rests on, one row: the compute capability (`major.minor`, NULL where the export does
-- not say) of each GPU that ran kernels, and the frameworks the export shows (profile_facts `framework`).
SELECT
  (SELECT list(d.compute_capability ORDER BY o.device_id)
   FROM (SELECT DISTINCT device_id FROM gpu_ops
         WHERE kind = 'kernel' AND ($device_id IS NULL OR device_id = $device_id)) o
   LEFT JOIN devices d USING (device_id)) AS capabilities,
  (SELECT list(value ORDER BY value) FROM profile_facts WHERE key = 'framework') AS frameworks;
