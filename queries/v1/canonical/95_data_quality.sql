-- nsysql canonical schema v1: the export's flawed rows, counted, so that what nsysql leaves out is said.
-- The other files drop a row that is no interval (no start or no end, or an end before its start: it would give
-- a negative duration and busy time) and keep a row that only lacks a link (a correlationId, a name); this file
-- counts both, from the same staged rows, in one pass over each table. Exact duplicate rows and names missing
-- from StringIds are not counted here (a grouping or a join of every row: a large part of a load), but by
-- `nsysql info` (queries/v1/analyses/row_checks.sql).

-- One row per kind of flaw found in the export: the nsys table, the canonical table it feeds, the problem, how
-- many rows have it, and what nsysql did with them. No rows: nothing found. `nsysql info` lists them.
CREATE OR REPLACE TABLE data_quality AS
WITH gpu AS (
  SELECT 'CUPTI_ACTIVITY_KIND_KERNEL' AS source, 1 AS ord,
         count(*) FILTER (start IS NULL OR "end" IS NULL) AS no_time,
         count(*) FILTER ("end" < start) AS backwards,
         count(*) FILTER (correlationId IS NULL AND "end" >= start) AS no_link
  FROM raw_kernel
  UNION ALL
  SELECT 'CUPTI_ACTIVITY_KIND_MEMCPY', 2, count(*) FILTER (start IS NULL OR "end" IS NULL),
         count(*) FILTER ("end" < start), count(*) FILTER (correlationId IS NULL AND "end" >= start)
  FROM raw_memcpy
  UNION ALL
  SELECT 'CUPTI_ACTIVITY_KIND_MEMSET', 3, count(*) FILTER (start IS NULL OR "end" IS NULL),
         count(*) FILTER ("end" < start), count(*) FILTER (correlationId IS NULL AND "end" >= start)
  FROM raw_memset
  UNION ALL
  SELECT 'CUPTI_ACTIVITY_KIND_GRAPH_TRACE', 4, count(*) FILTER (start IS NULL OR "end" IS NULL),
         count(*) FILTER ("end" < start), count(*) FILTER (correlationId IS NULL AND "end" >= start)
  FROM raw_graph
), cpu AS (
  SELECT 'CUPTI_ACTIVITY_KIND_RUNTIME' AS source, 'api_calls' AS canonical, 5 AS ord,
         count(*) FILTER (start IS NULL OR "end" IS NULL) AS no_time,
         count(*) FILTER ("end" < start) AS backwards,
         count(*) FILTER (correlationId IS NULL AND "end" >= start) AS no_link
  FROM raw_runtime
  UNION ALL
  SELECT 'OSRT_API', 'os_calls', 7, count(*) FILTER (start IS NULL OR "end" IS NULL), count(*) FILTER ("end" < start),
         0
  FROM raw_osrt
), nvtx AS (  -- push/pop and start/end ranges (eventType 59, 60), as 50_nvtx.sql reads them
  SELECT count(*) FILTER (start IS NULL) AS no_start,
         count(*) FILTER (start IS NOT NULL AND "end" IS NULL) AS open,
         count(*) FILTER ("end" < start) AS backwards
  FROM raw_nvtx WHERE eventType IN (59, 60)
), found AS (
  SELECT source, 'gpu_ops' AS canonical, ord, 'no start or no end' AS problem, no_time AS n,
         'dropped: not an interval of GPU time' AS effect FROM gpu
  UNION ALL
  SELECT source, 'gpu_ops', ord, 'end before start', backwards, 'dropped: its duration would be negative' FROM gpu
  UNION ALL
  SELECT source, 'gpu_ops', ord, 'no correlationId', no_link,
         'kept: not tied to the call that launched it, nor to its NVTX ranges' FROM gpu
  UNION ALL
  SELECT source, canonical, ord, 'no start or no end', no_time, 'dropped: not an interval of CPU time' FROM cpu
  UNION ALL
  SELECT source, canonical, ord, 'end before start', backwards, 'dropped: its duration would be negative' FROM cpu
  UNION ALL
  SELECT source, canonical, ord, 'no correlationId', no_link, 'kept: no GPU work is tied to it' FROM cpu
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'range with no start', no_start, 'dropped' FROM nvtx
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'range never ended (open when the capture stopped)', open,
         'dropped, as nsys does' FROM nvtx
  UNION ALL
  SELECT 'NVTX_EVENTS', 'nvtx_ranges', 8, 'end before start', backwards, 'dropped: its duration would be negative'
  FROM nvtx
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
