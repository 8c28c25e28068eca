-- nsysql canonical schema v1: the role of each process that did GPU work.

-- One row per process with GPU work: the device it used most, and its main thread: the thread whose NVTX
-- ranges enclose the most of its GPU work (process attribution), else the thread that launched most of it.
-- Iterations and idle-gap causes are read on that thread.
CREATE OR REPLACE TABLE process_roles AS
WITH dev AS (
  SELECT pid, device_id, count(*) AS ops FROM gpu_ops GROUP BY pid, device_id
  QUALIFY row_number() OVER (PARTITION BY pid ORDER BY count(*) DESC, device_id) = 1
), ranged AS (
  SELECT r.pid, r.tid, count(DISTINCT x.op_id) AS n FROM op_ranges x JOIN nvtx_ranges r USING (range_id)
  GROUP BY r.pid, r.tid
), launcher AS (
  SELECT pid, api_tid AS tid, count(*) AS n FROM gpu_ops WHERE api_tid IS NOT NULL GROUP BY pid, api_tid
), main_thread AS (
  SELECT pid, tid FROM (
    SELECT pid, tid, n, 1 AS pri FROM ranged UNION ALL SELECT pid, tid, n, 2 FROM launcher)
  QUALIFY row_number() OVER (PARTITION BY pid ORDER BY pri, n DESC, tid) = 1
)
SELECT
  -- process id
  d.pid,
  -- the device with most of the process's GPU ops
  d.device_id,
  -- GPU ops of the process on that device
  d.ops,
  -- the process's main thread (see above); NULL when no launch was traced
  m.tid AS main_tid
FROM dev d LEFT JOIN main_thread m USING (pid)
ORDER BY d.ops DESC;
