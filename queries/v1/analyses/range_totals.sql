-- @macros op_range_totals
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)

-- Per NVTX range: the GPU ops attributed to it by rule $attribution and their times (op_range_totals,
-- canonical/60_op_ranges.sql: ops, first_ns, last_ns, total_ns, proj_ns, captured_ns). Made once per profile's
-- DuckDB, as a table that ranges.sql, iteration_phases.sql and iteration_ranges.sql read (nsysql/analyses/
-- scratch.py): a summary reads it twice, a report three times, and each would group every op again.
SELECT * FROM op_range_totals($attribution);
