-- @include 00_macros.sql
-- @staging raw_runtime
-- @macros global_pid, global_tid, is_interval
-- @defines _calls

-- nsysql canonical schema v1: the CUDA API calls as api_calls has them, nsys's globalTid decoded into pid and
-- tid. A view in the staging database (gone when loading ends): api_calls (30_api_calls.sql) stores it, and
-- gpu_ops (40_gpu_ops.sql) joins it without waiting for api_calls to be written, so both start as soon as the
-- export is read.
CREATE OR REPLACE VIEW nsysql_stage._calls AS
SELECT r.row_id AS call_id, global_pid(r.globalTid) AS pid, global_tid(r.globalTid) AS tid,
       r.start AS start_ns, r."end" AS end_ns, r.nameId AS name_id, r.correlationId AS correlation_id
FROM raw_runtime r
-- a call without a start or an end, ending before it starts, or at a time beyond any clock (is_interval), is
-- dropped (data_quality counts them)
WHERE is_interval(r.start, r."end");
