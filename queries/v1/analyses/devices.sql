-- @tables devices

-- The GPUs of the profile, as the export describes them.
SELECT device_id, name, sm_count, memory_bytes, compute_capability FROM devices ORDER BY device_id;
