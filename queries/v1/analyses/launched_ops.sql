-- @tables gpu_ops, op_launch

-- Every GPU op with its launching call (api_call_id, api_start_ns, api_end_ns: NULL where no call was traced):
-- the columns that the launch figures (launch_figures.sql) and the per-iteration queries (placed_ops.sql,
-- iteration_activity.sql, iteration_metrics.sql) read, as query_table($ops): a view named
-- once per profile's DuckDB (nsysql/analyses/scratch.py), not a table. Each reader takes a part (one process's
-- ops, the kernels with a traced call) and a few columns, which the view's join reads alone; a table held every op
-- with 13 columns for the life of the DuckDB (1 GB of its memory at 10M ops, the rest of a summary spilling).
SELECT o.pid, o.kind, o.start_ns, o.end_ns, o.duration_ns, o.name_id, o.device_id, o.bytes, o.copy_kind,
       o.src_kind, l.api_call_id, l.api_start_ns, l.api_end_ns
FROM gpu_ops o LEFT JOIN op_launch l USING (op_id);
