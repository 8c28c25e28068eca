-- @tables gpu_ops, op_launch
-- @param $pid BIGINT: the process whose GPU ops are listed (any of its threads)

-- The GPU ops of process $pid with their launching call's start (api_start_ns, NULL where no call was traced):
-- the columns the per-iteration queries read (iterations.sql, iteration_evidence.sql, iteration_kernels.sql,
-- iteration_categories.sql, iteration_headroom.sql, iteration_activity.sql, iteration_metrics.sql). Made once
-- per profile's DuckDB as a table they read as query_table($ops) (nsysql/analyses/scratch.py): each joined
-- gpu_ops to op_launch again, a hash table of every op per query (30-40 ms each at 500k ops).
SELECT o.kind, o.start_ns, o.end_ns, o.duration_ns, o.name_id, o.device_id, o.bytes, o.copy_kind, o.src_kind,
       l.api_start_ns
FROM gpu_ops o LEFT JOIN op_launch l USING (op_id)
WHERE o.pid = $pid;
