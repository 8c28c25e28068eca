-- @tables gpu_memory_events

-- The frees of device memory whose allocation the export does not hold: an address whose first event is a free
-- was allocated before the capture began, and the export lacks nsys's listing of the allocations then live
-- (nsys 2025.3 writes them as allocations at time 0), or the allocation was not recorded (host memory,
-- delta_bytes 0, takes none of the device's). One row: how many such frees (frees), their bytes, and the first time the bytes
-- held fall below 0 (below_zero_ns: the running sum of gpu_memory.sql, per process and device, in its order;
-- NULL where they never do). frees 0: every free in the capture has its allocation in it.
WITH device AS (
  SELECT *, row_number() OVER (PARTITION BY pid, device_id, address ORDER BY ts_ns) AS nth
  FROM gpu_memory_events
  WHERE delta_bytes <> 0
), held AS (
  SELECT ts_ns,
         sum(delta_bytes) OVER (PARTITION BY pid, device_id ORDER BY ts_ns, address ROWS UNBOUNDED PRECEDING) AS bytes
  FROM gpu_memory_events
)
SELECT
  (SELECT count(*) FROM device WHERE nth = 1 AND operation = 'free') AS frees,
  (SELECT coalesce(sum(bytes), 0) FROM device WHERE nth = 1 AND operation = 'free')::BIGINT AS bytes,
  (SELECT min(ts_ns) FROM held WHERE bytes < 0) AS below_zero_ns;
