-- @include 00_macros.sql
-- @staging raw_graph, raw_strings
-- @macros copy_kinds
-- @defines strings

-- nsysql canonical schema v1: strings.
-- Names are stored once and referenced by id (gpu_ops.name_id, api_calls.name_id, os_calls.name_id): a
-- profile with millions of kernels has a few hundred distinct kernel names, each often hundreds of bytes.

-- Every string of the export (nsys StringIds, UTF-8 with invalid bytes replaced), plus nsysql's own labels
-- for GPU work that has no name in the export: memcpy by direction, memset and CUDA graph replays
-- (negative ids).
CREATE OR REPLACE TABLE strings AS
SELECT
  -- StringIds.id, or a negative id for nsysql's labels
  id,
  -- the text
  value
FROM raw_strings
UNION ALL
SELECT -1 - id, '[CUDA memcpy ' || label || ']' FROM copy_kinds()
UNION ALL SELECT -100, '[CUDA memset]'
UNION ALL SELECT DISTINCT -1000 - graphId, '[CUDA graph ' || graphId || ']' FROM raw_graph WHERE graphId IS NOT NULL
UNION ALL SELECT -999, '[CUDA graph]';
