-- @tables api_calls, gpu_ops, strings

-- The checks of the export's rows that the load leaves out, each needing a pass the load should not pay for
-- (`nsysql info` asks them once; its answer is stored), in data_quality's columns:
--   1. exact duplicates: GPU ops and CUDA API calls that repeat another row in every column but their id (no two
--      real ops of one stream, or calls of one thread, start and end together). Kept: finding them means
--      grouping every row. `rows`: the rows beyond the first of each group.
--   2. kernels whose name id the export's StringIds lacks: kept, with no name.
SELECT 'CUPTI_ACTIVITY_KIND_* (GPU work)' AS source, 'gpu_ops' AS canonical, 'exact duplicate rows' AS problem,
       coalesce(sum(n - 1), 0)::BIGINT AS "rows",
       'kept: counted again in counts and total times, as nsys stats counts them' AS effect
FROM (SELECT count(*) AS n FROM gpu_ops
      GROUP BY kind, device_id, stream_id, pid, start_ns, end_ns, correlation_id, name_id, bytes HAVING count(*) > 1)
UNION ALL
SELECT 'CUPTI_ACTIVITY_KIND_RUNTIME', 'api_calls', 'exact duplicate rows', coalesce(sum(n - 1), 0)::BIGINT,
       'kept: counted again in call counts and times, as nsys stats counts them'
FROM (SELECT count(*) AS n FROM api_calls
      GROUP BY pid, tid, start_ns, end_ns, correlation_id, name_id HAVING count(*) > 1)
UNION ALL
SELECT 'CUPTI_ACTIVITY_KIND_KERNEL', 'gpu_ops', 'name id not in StringIds', count(*), 'kept, with no name'
FROM gpu_ops o WHERE o.kind = 'kernel' AND NOT EXISTS (SELECT 1 FROM strings s WHERE s.id = o.name_id);
