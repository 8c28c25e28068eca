-- @include 00_macros.sql
-- @staging raw_enum_memkind, raw_gpu_memory
-- @macros global_pid
-- @defines gpu_memory_events, memory_held
-- @empty_without raw_gpu_memory

-- nsysql canonical schema v1: GPU memory allocations and frees (`nsys profile --cuda-memory-usage=true`).

-- One row per allocation or free that CUDA reported (CUDA_GPU_MEMORY_USAGE_EVENTS), in time order. Empty when
-- the export did not trace memory usage (the table is then absent and nothing is read). A free carries the
-- bytes of the allocation it frees, so the running sum of delta_bytes is the memory a process holds on a device
-- through CUDA's allocator. nsys (2025.3, with a capture range) lists the allocations still live when the
-- capture began as allocations at time 0, so the sum starts from what the process held then; an export without
-- them is net of that memory (a free of it makes the sum fall below 0: gpu_memory_before_capture.sql). PyTorch's
-- caching allocator asks CUDA for large blocks and reuses them, so with it the sum is the memory reserved, not
-- the tensors alive.
CREATE OR REPLACE TABLE gpu_memory_events AS
WITH kinds AS (  -- ENUM_CUDA_MEM_KIND's label; without the enum (older exports) ids 0-3 as 40_gpu_ops.sql says
  SELECT id, label FROM raw_enum_memkind
  UNION ALL
  SELECT * FROM (VALUES (0, 'Pageable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array')) v(id, label)
  WHERE NOT EXISTS (SELECT 1 FROM raw_enum_memkind)
)
SELECT
  -- when CUDA reported the allocation or free, ns (the export's clock)
  m.start AS ts_ns,
  -- the process that allocated or freed, as in processes.pid
  global_pid(m.globalPid) AS pid,
  -- CUDA device id, as in gpu_ops.device_id
  m.deviceId AS device_id,
  -- 'allocation' or 'free' (memoryOperationType 0 or 1, ENUM_CUDA_DEV_MEM_EVENT_OPER)
  CASE m.memoryOperationType WHEN 0 THEN 'allocation' WHEN 1 THEN 'free' END AS operation,
  -- the virtual address allocated or freed
  m.address,
  -- bytes allocated or freed (always positive)
  m.bytes,
  -- +bytes for an allocation, -bytes for a free: the running sum per process and device is the memory held on
  -- the device. 0 for host memory (kinds `Pinned`, `Pageable`: cudaHostAlloc, cudaMallocHost), which CUDA reports
  -- with the device of its context but which takes none of the device's memory
  CASE WHEN k.label IN ('Pinned', 'Pageable') THEN 0
       ELSE CASE m.memoryOperationType WHEN 0 THEN m.bytes WHEN 1 THEN -m.bytes ELSE 0 END
  END AS delta_bytes,
  -- memory kind (ENUM_CUDA_MEM_KIND's label, e.g. `Device`, `Device Static`, `Managed`); NULL when unknown
  k.label AS memory_kind,
  -- the variable's name where CUDA knows it (static device variables), else NULL
  m.name
FROM raw_gpu_memory m
LEFT JOIN kinds k ON k.id = m.memKind
WHERE m.memoryOperationType IN (0, 1)
ORDER BY m.start, m.address;

-- The memory each process held on each device over windows of time: for every row of the table named `win`
-- (columns pid, start_ns, end_ns: iteration windows, NVTX ranges) and every device its process allocated on,
-- what it held when the window opened (the running sum of gpu_memory_events.delta_bytes over the events before
-- start_ns), the most it held inside [start_ns, end_ns), and what it held when the window closed (events before
-- end_ns). Several events at one timestamp count as one step (their sum), so a window never sees half of them.
CREATE OR REPLACE MACRO memory_held(
  -- VARCHAR: name of a table or view with columns pid, start_ns, end_ns
  win
)
-- pid, start_ns, end_ns as in `win` (one row per distinct window and device); device_id; start_bytes,
-- peak_bytes, end_bytes: held at the start, at most inside, at the end (bytes, net of the capture's start)
AS TABLE
WITH steps AS (
  SELECT pid, device_id, ts_ns, sum(delta_bytes) AS delta FROM gpu_memory_events GROUP BY ALL
), held AS (
  SELECT pid, device_id, ts_ns,
         sum(delta) OVER (PARTITION BY pid, device_id ORDER BY ts_ns ROWS UNBOUNDED PRECEDING)::BIGINT AS bytes
  FROM steps
), w AS (
  SELECT DISTINCT w.pid, d.device_id, w.start_ns, w.end_ns
  FROM query_table(win) w
  JOIN (SELECT DISTINCT pid, device_id FROM gpu_memory_events) d ON d.pid = w.pid
), opened AS (
  SELECT w.*, coalesce(h.bytes, 0) AS start_bytes
  FROM w ASOF LEFT JOIN held h ON h.pid = w.pid AND h.device_id = w.device_id AND w.start_ns > h.ts_ns
), closed AS (
  SELECT o.*, coalesce(h.bytes, 0) AS end_bytes
  FROM opened o ASOF LEFT JOIN held h ON h.pid = o.pid AND h.device_id = o.device_id AND o.end_ns > h.ts_ns
)
SELECT c.pid, c.start_ns, c.end_ns, c.device_id, c.start_bytes,
       greatest(c.start_bytes, coalesce(max(h.bytes), c.start_bytes)) AS peak_bytes, c.end_bytes
FROM closed c
LEFT JOIN held h ON h.pid = c.pid AND h.device_id = c.device_id AND h.ts_ns >= c.start_ns AND h.ts_ns < c.end_ns
GROUP BY c.pid, c.start_ns, c.end_ns, c.device_id, c.start_bytes, c.end_bytes;
