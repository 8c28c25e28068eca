-- @tables api_calls, devices, gpu_metric_samples, gpu_ops, nvtx_marks, nvtx_payloads, nvtx_ranges, os_calls, processes
-- @tables threads

-- Row counts of the canonical tables, by what they hold.
SELECT 'kernels' AS what, count(*) AS rows FROM gpu_ops WHERE kind = 'kernel'
UNION ALL SELECT 'memcpy', count(*) FROM gpu_ops WHERE kind = 'memcpy'
UNION ALL SELECT 'memset', count(*) FROM gpu_ops WHERE kind = 'memset'
UNION ALL SELECT 'graph launches', count(*) FROM gpu_ops WHERE kind = 'graph'
UNION ALL SELECT 'CUDA API calls', count(*) FROM api_calls
UNION ALL SELECT 'NVTX ranges', count(*) FROM nvtx_ranges
UNION ALL SELECT 'NVTX marks', count(*) FROM nvtx_marks
UNION ALL SELECT 'OS runtime calls', count(*) FROM os_calls
UNION ALL SELECT 'processes', count(*) FROM processes
UNION ALL SELECT 'threads', count(*) FROM threads
UNION ALL SELECT 'GPUs', count(*) FROM devices
UNION ALL SELECT 'GPU metrics samples', count(*) FROM gpu_metric_samples
UNION ALL SELECT 'NVTX events with payloads', count(DISTINCT event_id) FROM nvtx_payloads
UNION ALL SELECT 'NCCL ranges', count(*) FROM nvtx_ranges WHERE domain = 'NCCL'
UNION ALL SELECT 'NCCL ranges with payloads', count(DISTINCT event_id) FROM nvtx_payloads WHERE domain = 'NCCL' AND event = 'range';
