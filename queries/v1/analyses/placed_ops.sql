-- @macros ops_by_iteration
-- @param $ops VARCHAR: name of the table of every GPU op with its launch (launched_ops.sql, scratch.py)
-- @param $pid BIGINT: the process whose GPU ops count (any of its threads)
-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- Each GPU op of process $pid (of the table named $ops) with the iteration it was launched in (ops_by_iteration,
-- 00_macros.sql: at its launching call's start, else at its own; ops launched outside every window have no row),
-- and the columns its readers take (an op's length is theirs to take: end_ns - start_ns, gpu_ops.duration_ns; the
-- table is held in memory). Made once per profile's DuckDB as a table that iterations.sql,
-- iteration_evidence.sql, iteration_kernels.sql, iteration_categories.sql and iteration_headroom.sql read as
-- query_table($placed) (nsysql/analyses/scratch.py), each with its own filter: an op's iteration depends on the
-- op and the windows alone, so filtering after placing gives what placing the filtered ops gave, and the ops meet
-- the windows once.
WITH mine AS (
  SELECT kind, start_ns, end_ns, name_id, bytes, copy_kind, src_kind, api_start_ns
  FROM query_table($ops) WHERE pid = $pid
)
SELECT iteration, kind, start_ns, end_ns, name_id, bytes, copy_kind, src_kind
FROM ops_by_iteration('mine', $windows);
