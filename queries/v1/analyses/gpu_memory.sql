-- @tables gpu_memory_events

-- GPU memory over time: every allocation and free CUDA reported (`nsys profile --cuda-memory-usage=true`), with
-- what the process held on the device after it (held_bytes: the running sum of allocations minus frees, net of
-- allocations the export does not hold; see canonical/47_gpu_memory.sql).
SELECT
  ts_ns, pid, device_id, operation, bytes, memory_kind, name,
  sum(delta_bytes) OVER (PARTITION BY pid, device_id ORDER BY ts_ns, address
                         ROWS UNBOUNDED PRECEDING)::BIGINT AS held_bytes
FROM gpu_memory_events
ORDER BY ts_ns, pid, device_id, address;
