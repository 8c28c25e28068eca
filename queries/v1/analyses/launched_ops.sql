-- @tables gpu_ops, op_launch

-- Every GPU op with its launching call (api_start_ns, api_end_ns: NULL where no call was traced, and only
-- there: a call has both, 25_calls.sql). Held in memory, so without what its readers can derive: an op's length is
-- end_ns - start_ns (gpu_ops.duration_ns), a traced launch one whose api_start_ns is not NULL:
-- the columns that the launch figures (launch_figures.sql) and the per-iteration queries (placed_ops.sql,
-- iteration_activity.sql, iteration_metrics.sql) read. Made once per profile's DuckDB as
-- a table they read as query_table($ops) (nsysql/analyses/scratch.py): each joined gpu_ops to op_launch again,
-- a hash table of every op per query.
SELECT o.pid, o.kind, o.start_ns, o.end_ns, o.name_id, o.device_id, o.bytes, o.copy_kind, o.src_kind,
       l.api_start_ns, l.api_end_ns
FROM gpu_ops o LEFT JOIN op_launch l USING (op_id);
