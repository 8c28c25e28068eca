-- @tables api_calls, devices, gpu_ops, nvtx_ranges, processes, threads

-- Names of the processes and threads the trace shows (those with CUDA API calls or NVTX ranges, and the
-- processes that own GPU work), and of the GPUs: kind ('process', 'thread' or 'device'), ids, name.
WITH shown AS (
  SELECT DISTINCT pid, tid FROM api_calls
  UNION SELECT DISTINCT pid, tid FROM nvtx_ranges
)
SELECT 'thread' AS kind, s.pid AS id, s.tid AS sub_id, t.name
FROM shown s LEFT JOIN threads t ON t.pid = s.pid AND t.tid = s.tid
UNION ALL
SELECT 'process', p.pid, NULL, p.name
FROM processes p
WHERE p.pid IN (SELECT pid FROM shown UNION SELECT DISTINCT pid FROM gpu_ops)
UNION ALL
SELECT 'device', device_id, NULL, name FROM devices
ORDER BY 1, 2, 3;
