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
SELECT -1 - k, '[CUDA memcpy ' || label || ']' FROM (VALUES
  (0, 'Unknown'), (1, 'Host-to-Device'), (2, 'Device-to-Host'), (3, 'Host-to-Array'), (4, 'Array-to-Host'),
  (5, 'Array-to-Array'), (6, 'Array-to-Device'), (7, 'Device-to-Array'), (8, 'Device-to-Device'),
  (9, 'Host-to-Host'), (10, 'Peer-to-Peer'), (11, 'Unified Host-to-Device'), (12, 'Unified Device-to-Host'),
  (13, 'Unified Device-to-Device')
) t(k, label)
UNION ALL SELECT -100, '[CUDA memset]'
UNION ALL SELECT DISTINCT -1000 - graphId, '[CUDA graph ' || graphId || ']' FROM raw_graph WHERE graphId IS NOT NULL
UNION ALL SELECT -999, '[CUDA graph]';
