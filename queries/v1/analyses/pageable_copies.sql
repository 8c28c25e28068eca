-- @param $device_id BIGINT: only this device's copies (the loop's, findings.py); NULL: every device's
-- @tables gpu_ops

-- Host-to-device copies from pageable (unpinned) host memory: synchronous staging copies.
SELECT count(*) AS copies, coalesce(sum(bytes), 0)::BIGINT AS bytes, coalesce(sum(duration_ns), 0)::BIGINT AS ns
FROM gpu_ops WHERE kind = 'memcpy' AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable'
  AND ($device_id IS NULL OR device_id = $device_id);
