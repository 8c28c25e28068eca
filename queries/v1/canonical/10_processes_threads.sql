-- @include 00_macros.sql
-- @staging raw_graph, raw_kernel, raw_memcpy, raw_memset, raw_nvtx, raw_processes, raw_runtime, raw_strings
-- @staging raw_threadnames
-- @macros global_pid, global_tid
-- @defines processes, threads

-- nsysql canonical schema v1: processes and threads.
-- Built from the loader's raw_* staging tables; analyses read only the tables defined here.
-- nsys packs ids as globalTid = (pid << 24) | tid and globalPid = pid << 24, with VM/host bits above 48.

-- One row per process seen anywhere in the export.
CREATE OR REPLACE TABLE processes AS
WITH seen AS (
  SELECT DISTINCT global_pid(globalPid) AS pid FROM raw_kernel
  UNION SELECT DISTINCT global_pid(globalPid) FROM raw_memcpy
  UNION SELECT DISTINCT global_pid(globalPid) FROM raw_memset
  UNION SELECT DISTINCT global_pid(globalPid) FROM raw_graph
  UNION SELECT DISTINCT global_pid(globalTid) FROM raw_runtime
  UNION SELECT DISTINCT global_pid(globalTid) FROM raw_nvtx
  UNION SELECT DISTINCT global_pid(globalTid) FROM raw_threadnames
)
SELECT
  -- operating-system process id
  s.pid,
  -- executable name from PROCESSES, NULL in exports before 2022 that have no such table
  any_value(p.name) AS name
FROM seen s
LEFT JOIN raw_processes p ON p.pid = s.pid
WHERE s.pid IS NOT NULL
GROUP BY s.pid;

-- One row per named thread (nsys ThreadNames).
CREATE OR REPLACE TABLE threads AS
SELECT
  -- process id
  global_pid(t.globalTid) AS pid,
  -- operating-system thread id
  global_tid(t.globalTid) AS tid,
  -- thread name, e.g. `python3` or `pt_autograd_0`
  any_value(s.value) AS name
FROM raw_threadnames t
LEFT JOIN raw_strings s ON s.id = t.nameId
GROUP BY 1, 2;
