-- @include 40_gpu_ops.sql, 42_op_launch.sql, 50_nvtx.sql, 60_op_ranges.sql
-- @tables gpu_ops, nvtx_ranges, op_launch, op_ranges
-- @defines process_roles

-- nsysql canonical schema v1: the role of each process that did GPU work.

-- One row per process with GPU work: the device it used most, and its main thread: the thread whose NVTX
-- ranges enclose the most of its GPU work (process attribution), else the thread that launched most of it.
-- Iterations and idle-gap causes are read on that thread.
CREATE OR REPLACE TABLE process_roles AS
WITH dev AS (
  SELECT pid, device_id, count(*) AS ops FROM gpu_ops GROUP BY pid, device_id
  QUALIFY row_number() OVER (PARTITION BY pid ORDER BY count(*) DESC, device_id) = 1
), roots AS (  -- the ops inside push/pop ranges of a thread, each once: an op's push/pop ranges on one thread
               -- are a range and all its ancestors (op_ranges' thread and process rules), so exactly one of them
               -- is outermost
  SELECT r.pid, r.tid, x.op_id FROM op_ranges x JOIN nvtx_ranges r USING (range_id)
  WHERE r.style = 'PushPop' AND r.parent_id IS NULL
), start_end AS (  -- the ops inside start/end ranges of a thread, each once (an op may be in several)
  SELECT DISTINCT r.pid, r.tid, x.op_id FROM op_ranges x JOIN nvtx_ranges r USING (range_id) WHERE r.style = 'StartEnd'
), ranged AS (  -- ops inside any range of the thread: the two sets above, less the ops in both. The same count as
                -- count(DISTINCT op_id) over op_ranges joined to nvtx_ranges, without hashing every (op, range) row
                -- (this is on the way from op_ranges to every answer)
  SELECT pid, tid, sum(n)::BIGINT AS n FROM (
    SELECT pid, tid, count(*) AS n FROM roots GROUP BY pid, tid
    UNION ALL SELECT pid, tid, count(*) FROM start_end GROUP BY pid, tid
    UNION ALL SELECT pid, tid, -count(*) FROM roots JOIN start_end USING (pid, tid, op_id) GROUP BY pid, tid)
  GROUP BY pid, tid
), launcher AS (
  SELECT api_pid AS pid, api_tid AS tid, count(*) AS n FROM op_launch WHERE api_tid IS NOT NULL
  GROUP BY api_pid, api_tid
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
