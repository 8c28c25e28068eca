-- @include 00_macros.sql
-- @staging raw_runtime
-- @macros global_pid, global_tid, is_interval
-- @defines _call_rows, _calls, _launch_calls, _shared_calls, _shared_ids

-- nsysql canonical schema v1: the CUDA API calls as api_calls has them, nsys's globalTid decoded into pid and
-- tid, and the correlation ids several of them share. In the staging database (gone when loading ends; a later
-- load that builds a file including this one runs it again): api_calls (30_api_calls.sql) stores the calls, and
-- op_launch (42_op_launch.sql) joins them without waiting for api_calls to be written, so both start as soon
-- as the export is read.
CREATE OR REPLACE VIEW nsysql_stage._call_rows AS
SELECT r.row_id AS call_id, global_pid(r.globalTid) AS pid, global_tid(r.globalTid) AS tid,
       r.start AS start_ns, r."end" AS end_ns, r.nameId AS name_id, r.correlationId AS correlation_id,
-- is_call: whether the row is a call. A row without a start or an end, ending before it starts, or at a time
-- beyond any clock (is_interval), is not (data_quality counts them). Nor is a CUDA backtrace (`--cudabacktrace`),
-- which nsys 2020-2022 wrote as a second row of the call it was taken for (eventClass 67, TRACE_PROCESS_EVENT_
-- CUDABACKTRACE in ENUM_NSYS_EVENT_CLASS, or its _START 68 and _FINISH 69): the same process, thread and
-- correlation id, the function's name without its version suffix, around the call. Counted as a call, it would
-- count the call twice, and an op would take it as its launch (the outer of two calls of one id). A runtime call
-- (eventClass 0) and the driver call it makes under its id (1) are both calls. Where the export has no eventClass
-- (NULL), every row with an interval is a call. The loader's read of the calls' extent drops the same rows
-- (nsysql/loader/raw.py).
       is_interval(r.start, r."end") AND NOT coalesce((r.eventClass >= 67 AND r.eventClass <= 69), false) AS is_call
FROM raw_runtime r;

-- The calls: the rows that are calls.
CREATE OR REPLACE VIEW nsysql_stage._calls AS SELECT * EXCLUDE (is_call) FROM _call_rows WHERE is_call;

-- Every staged runtime row, its correlation id NULL where it is no call: a join on (pid, correlation_id) meets
-- the rows of _calls alone, as a join with _calls does, while DuckDB counts it as many rows as were staged. Through
-- _calls' filter it guessed a fifth of them or less, took the calls (18M at 10M kernels, seven columns) for the
-- smaller side and built its hash table of them, past its memory share; op_launch (42_op_launch.sql) reads the
-- calls here, so the ops' keys make the table and the calls stream past it.
CREATE OR REPLACE VIEW nsysql_stage._launch_calls AS
SELECT * EXCLUDE (is_call, correlation_id), CASE WHEN is_call THEN correlation_id END AS correlation_id FROM _call_rows;

-- Which call launched each op, matched on (process, correlation id): at most one call per op, in time that
-- grows with the ops and calls whatever the ids, by this rule. CUPTI gives each call of a process its own id, and
-- an op takes the call of its id. Where several calls of a process share one id (a broken or hostile export),
-- those enclosed by an earlier call of the same id on the same thread are left out (some exports hold a runtime
-- call and the driver call inside it under one id: the outer call is the launch), and of the rest the op takes
-- the latest that starts at or before the op starts, or the earliest when all start after it (clocks apart).
-- data_quality counts the calls of ids left with several candidates (95_data_quality.sql); op_launch applies
-- the rule (42_op_launch.sql). Here, in the staging database, both read the shared ids without matching the ops.
-- Grouping every call by its id costs a hash table as large as the calls (0.1 s CPU at 1M calls, more than
-- linearly beyond). nsys writes each process's calls with ids that grow, and the loader stages them in runs of
-- rowids (one per range read side by side, NSYSQL_READERS) in any order. In the order one scan gives, cut the
-- calls into runs where each call follows the one before it in rowid (call_id + 1: a gap, or a new range, starts
-- a run) with a key (pid, correlation_id) strictly above it. A run holds no key twice and lies within [its first
-- key, its last key]; when no two runs' spans overlap, no key is shared: one streaming pass and a sort of the
-- runs (a few, as a rule). Runs that overlap (threads whose calls are written out of order, say) or a NULL pid
-- leave the proof to the grouping. The runs' first calls, and the last call of all (the one no call follows):
-- row_number, lag and lead in one window (the same empty OVER clause: one operator, one order, and no second
-- scan of the calls to count them), kept in a table so that both reads below see that one order.
CREATE OR REPLACE TEMP TABLE _call_runs AS
SELECT n, starts, (pid::HUGEINT << 64) + correlation_id AS k, (lp::HUGEINT << 64) + lc AS prev FROM (
  SELECT *, NOT coalesce(call_id = lcall + 1 AND (pid > lp OR (pid = lp AND correlation_id > lc)), false) AS starts
  FROM (SELECT call_id, pid, correlation_id, lag(call_id) OVER () AS lcall, lag(pid) OVER () AS lp,
               lag(correlation_id) OVER () AS lc, row_number() OVER () AS n, lead(call_id) OVER () AS ncall
        FROM _calls WHERE correlation_id IS NOT NULL))
WHERE starts OR ncall IS NULL;

CREATE OR REPLACE TABLE nsysql_stage._shared_ids AS  -- (pid, correlation_id) of more than one call: none, as a rule
WITH runs AS (  -- each run's first key and its last: the key before the next run starts, or the last call's.
                -- k: (pid, correlation_id) as one number that orders as the pair does (both BIGINT)
  SELECT k AS lo, coalesce(lead(prev) OVER (ORDER BY n), (SELECT k FROM _call_runs ORDER BY n DESC LIMIT 1)) AS hi
  FROM _call_runs WHERE starts
), proof AS (
  SELECT coalesce(bool_and(lo IS NOT NULL AND hi IS NOT NULL AND (before IS NULL OR lo > before)), true) AS proven
  FROM (SELECT lo, hi, lag(hi) OVER (ORDER BY lo) AS before FROM runs)
)
SELECT pid, correlation_id FROM _calls
WHERE correlation_id IS NOT NULL AND NOT (SELECT proven FROM proof)
GROUP BY ALL HAVING count(*) > 1;

-- The candidate calls of the shared ids (those not enclosed by an earlier call of the same id and thread), each
-- with how many candidates its id has. In the staging database (gone when loading ends), for data_quality.
CREATE OR REPLACE TABLE nsysql_stage._shared_calls AS
SELECT call_id, pid, correlation_id, start_ns, count(*) OVER (PARTITION BY pid, correlation_id) AS candidates
FROM (
  SELECT * FROM _calls SEMI JOIN _shared_ids USING (pid, correlation_id)
  QUALIFY coalesce(max(end_ns) OVER (PARTITION BY pid, tid, correlation_id ORDER BY start_ns, end_ns DESC, call_id
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) < end_ns, true)
);
