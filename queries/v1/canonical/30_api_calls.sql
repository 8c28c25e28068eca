-- @include 00_macros.sql, 25_calls.sql
-- @staging raw_osrt
-- @tables _calls
-- @macros global_pid, global_tid, is_interval
-- @defines api_calls, os_calls

-- nsysql canonical schema v1: CPU-side calls (CUDA API, OS runtime). api_calls stores the staging view
-- _calls of 25_calls.sql, which gpu_ops joins too.

-- One row per CUDA runtime or driver API call (nsys CUPTI_ACTIVITY_KIND_RUNTIME).
CREATE OR REPLACE TABLE api_calls AS
SELECT
  -- the call's SQLite rowid in the export: unique and stable across loads; gpu_ops.api_call_id points here
  call_id,
  -- process id
  pid,
  -- thread that made the call
  tid,
  -- call start, ns on the export's clock
  start_ns,
  -- call end, ns
  end_ns,
  -- strings.id of the API function's name, e.g. `cudaLaunchKernel_v7000`, `cudaMemcpyAsync_v3020`
  name_id,
  -- CUPTI correlation id: unique per process, joins the call to the GPU work it started
  correlation_id
FROM _calls;

-- One row per OS runtime call traced with `-t osrt` (nsys OSRT_API): sleeps, polls, futex waits, reads.
CREATE OR REPLACE TABLE os_calls AS
SELECT
  -- process id
  global_pid(o.globalTid) AS pid,
  -- thread id
  global_tid(o.globalTid) AS tid,
  -- call start, ns
  o.start AS start_ns,
  -- call end, ns
  o."end" AS end_ns,
  -- strings.id of the libc/OS function's name, e.g. `nanosleep`, `pthread_cond_wait`, `read`
  o.nameId AS name_id,
  -- nesting level nsys records for calls made inside other traced calls (0 = outermost)
  coalesce(o.nestingLevel, 0) AS nesting_level
FROM raw_osrt o
-- a call without a start or an end, ending before it starts, or at a time beyond any clock (is_interval), is
-- dropped (data_quality counts them)
WHERE is_interval(o.start, o."end");
