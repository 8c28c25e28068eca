-- @include 00_macros.sql, 25_calls.sql
-- @staging nsysql_stage._load_beyond_int64, raw_graph, raw_kernel, raw_memcpy, raw_memset, raw_nvtx, raw_osrt
-- @staging raw_runtime
-- @tables _shared_calls
-- @macros is_interval
-- @defines data_quality

-- nsysql canonical schema v1: the export's flawed rows, counted, so that what nsysql leaves out is said.
-- The other files drop a row that is no interval (no start or no end, an end before its start: it would give
-- a negative duration and busy time, or a time beyond any clock: is_interval in 00_macros.sql) and keep a row
-- that only lacks a link (a correlationId, a name); this file counts both, from the same staged rows, in one pass
-- over each table. Exact duplicate rows and names missing from StringIds are not counted here (a grouping or a
-- join of every row: a large part of a load), but by `nsysql info` (queries/v1/analyses/row_checks.sql).

-- One row per kind of flaw found in the export: the nsys table, the canonical table it feeds, the problem, how
-- many rows have it, and what nsysql did with them. No rows: nothing found. `nsysql info` lists them.
CREATE OR REPLACE TABLE data_quality AS
WITH gpu AS (
  SELECT 'CUPTI_ACTIVITY_KIND_KERNEL' AS source, 1 AS ord,
         count(*) FILTER (start IS NULL OR "end" IS NULL) AS no_time,
         count(*) FILTER ("end" < start) AS backwards,
         count(*) FILTER (correlationId IS NULL AND "end" >= start) AS no_link,
         count(*) FILTER ("end" >= start AND NOT is_interval(start, "end")) AS beyond
  FROM raw_kernel
  UNION ALL
  SELECT 'CUPTI_ACTIVITY_KIND_MEMCPY', 2, count(*) FILTER (start IS NULL OR "end" IS NULL),
         count(*) FILTER ("end" < start), count(*) FILTER (correlationId IS NULL AND "end" >= start),
         count(*) FILTER ("end" >= start AND NOT is_interval(start, "end"))
  FROM raw_memcpy
  UNION ALL
  SELECT 'CUPTI_ACTIVITY_KIND_MEMSET', 3, count(*) FILTER (start IS NULL OR "end" IS NULL),
         count(*) FILTER ("end" < start), count(*) FILTER (correlationId IS NULL AND "end" >= start),
         count(*) FILTER ("end" >= start AND NOT is_interval(start, "end"))
  FROM raw_memset
  UNION ALL
  SELECT 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE', 4, count(*) FILTER (start IS NULL OR "end" IS NULL),
         count(*) FILTER ("end" < start), count(*) FILTER (correlationId IS NULL AND "end" >= start),
         count(*) FILTER ("end" >= start AND NOT is_interval(start, "end"))
  FROM raw_graph
), cpu AS (
  SELECT 'CUPTI_ACTIVITY_KIND_RUNTIME' AS source, 'api_calls' AS canonical, 5 AS ord,
         count(*) FILTER (start IS NULL OR "end" IS NULL) AS no_time,
         count(*) FILTER ("end" < start) AS backwards,
         count(*) FILTER (correlationId IS NULL AND "end" >= start) AS no_link,
         count(*) FILTER ("end" >= start AND NOT is_interval(start, "end")) AS beyond
  FROM raw_runtime WHERE NOT coalesce(eventClass >= 67 AND eventClass <= 69, false)  -- the calls: not their backtraces, below
  UNION ALL
  SELECT 'OSRT_API', 'os_calls', 7, count(*) FILTER (start IS NULL OR "end" IS NULL), count(*) FILTER ("end" < start),
         0, count(*) FILTER ("end" >= start AND NOT is_interval(start, "end"))
  FROM raw_osrt
), nvtx AS (  -- push/pop and start/end ranges (eventType 59, 60), as 50_nvtx.sql reads them
  SELECT count(*) FILTER (start IS NULL) AS no_start,
         count(*) FILTER (start IS NOT NULL AND "end" IS NULL) AS open,
         count(*) FILTER ("end" < start) AS backwards,
         count(*) FILTER ("end" >= start AND NOT is_interval(start, "end")) AS beyond
  FROM raw_nvtx WHERE eventType IN (59, 60)
), found AS (
  SELECT source, 'gpu_ops' AS canonical, ord, 'no start or no end' AS problem, no_time AS n,
         'dropped: not an interval of GPU time' AS effect FROM gpu
  UNION ALL
  SELECT source, 'gpu_ops', ord, 'end before start', backwards, 'dropped: its duration would be negative' FROM gpu
  UNION ALL
  SELECT source, 'gpu_ops', ord, 'start or end beyond +-2^62 ns', beyond, 'dropped: no clock gives such a time'
  FROM gpu
  UNION ALL
  SELECT source, 'gpu_ops', ord, 'no correlationId', no_link,
         'kept: not tied to the call that launched it, nor to its NVTX ranges' FROM gpu
  UNION ALL
  SELECT source, canonical, ord, 'no start or no end', no_time, 'dropped: not an interval of CPU time' FROM cpu
  UNION ALL
  SELECT source, canonical, ord, 'end before start', backwards, 'dropped: its duration would be negative' FROM cpu
  UNION ALL
  SELECT source, canonical, ord, 'start or end beyond +-2^62 ns', beyond, 'dropped: no clock gives such a time'
  FROM cpu
  UNION ALL
  SELECT source, canonical, ord, 'no correlationId', no_link, 'kept: no GPU work is tied to it' FROM cpu
  UNION ALL  -- the CUDA backtraces nsys wrote as a second row of their call (25_calls.sql drops them)
  SELECT 'CUPTI_ACTIVITY_KIND_RUNTIME', 'api_calls', 5,
         'CUDA backtrace (eventClass 67-69): a second row of the call it was taken for', count(*),
         'dropped: no call of its own; the call itself counts'
  FROM raw_runtime WHERE eventClass >= 67 AND eventClass <= 69
  UNION ALL  -- the calls of ids that several calls of a process share (25_calls.sql): an op of such an id is
             -- tied to one of them by a rule, which may not be the call that launched it
  SELECT 'CUPTI_ACTIVITY_KIND_RUNTIME', 'gpu_ops', 5, 'correlationId shared by several calls',
         count(*), 'kept: a GPU op of such an id is tied to the latest of them that started at or before it '
                   || '(the earliest, if none did), perhaps not its launch'
  FROM _shared_calls WHERE candidates > 1
  UNION ALL  -- REALs in an integer column beyond what 64 bits hold (the loader counts them: nsysql/loader/source.py)
  SELECT source, CASE WHEN source LIKE 'CUPTI_ACTIVITY_KIND_%' AND source <> 'CUPTI_ACTIVITY_KIND_RUNTIME'
                      THEN 'gpu_ops' WHEN source = 'CUPTI_ACTIVITY_KIND_RUNTIME' THEN 'api_calls'
                      WHEN source = 'NVTX_EVENTS' THEN 'nvtx_ranges' WHEN source = 'OSRT_API' THEN 'os_calls'
                      ELSE '' END,
         9, col || ' beyond 64-bit integers (a REAL)', n, 'read as NULL (unknown), never wrapped round'
  FROM nsysql_stage._load_beyond_int64
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'range with no start', no_start, 'dropped' FROM nvtx
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'range never ended (open when the capture stopped)', open,
         'dropped, as nsys does' FROM nvtx
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'end before start', backwards, 'dropped: its duration would be negative'
  FROM nvtx
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'start or end beyond +-2^62 ns', beyond,
         'dropped: no clock gives such a time' FROM nvtx
)
SELECT
  -- the nsys table the rows are in, e.g. `CUPTI_ACTIVITY_KIND_KERNEL`
  source,
  -- the canonical table those rows feed, e.g. `gpu_ops`
  canonical,
  -- what is wrong with them, e.g. `end before start`
  problem,
  -- how many rows of `source` have the problem
  n AS "rows",
  -- what nsysql did with them: `dropped: ...` (left out of every table and answer) or `kept: ...`
  effect
FROM found
WHERE n > 0
ORDER BY ord, problem;
