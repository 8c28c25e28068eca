-- Per process: the device it used most (by GPU op count) and the thread whose NVTX ranges enclose most of its
-- GPU work (process attribution), else the thread that launched most of it.
WITH dev AS (
  SELECT pid, device_id, count(*) AS ops FROM gpu_ops GROUP BY pid, device_id
  QUALIFY row_number() OVER (PARTITION BY pid ORDER BY count(*) DESC, device_id) = 1
), ranged AS (
  SELECT r.pid, r.tid, count(DISTINCT x.op_id) AS n FROM op_ranges x JOIN nvtx_ranges r USING (range_id)
  GROUP BY ALL
), launcher AS (
  SELECT pid, api_tid AS tid, count(*) AS n FROM gpu_ops WHERE api_tid IS NOT NULL GROUP BY ALL
), main_thread AS (
  SELECT pid, tid FROM (
    SELECT pid, tid, n, 1 AS pri FROM ranged UNION ALL SELECT pid, tid, n, 2 FROM launcher)
  QUALIFY row_number() OVER (PARTITION BY pid ORDER BY pri, n DESC, tid) = 1
)
SELECT d.pid, d.device_id, d.ops, m.tid AS main_tid
FROM dev d LEFT JOIN main_thread m USING (pid)
ORDER BY d.ops DESC;
