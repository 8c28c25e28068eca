-- @include 00_macros.sql, 40_gpu_ops.sql, 45_kernel_classes.sql
-- @tables gpu_ops, kernel_classes
-- @macros is_host_copy, union_stretches
-- @defines device_layers

-- nsysql canonical schema v1: the sparse layers of a device's GPU time (communication kernels, memory copies) and
-- the part of each that compute work hid, as a macro over gpu_ops and kernel_classes, for the analyses of
-- communication overlap (overlap.sql) and of the step's time partition (iterations.sql). A macro, not a table:
-- the analyses ask it of one device, and a load that no such question follows pays nothing for it.

-- The time of a device's communication kernels and of its copies, each with the part of it that other work
-- covered, each a union of intervals (union_stretches, 00_macros.sql), in six layers:
--   `comm`        communication kernels: category `communication` by the rules of 44_kernel_rules.sql (NCCL and
--                 other collectives)
--   `comm_hidden` the part of `comm` during which a compute kernel ran too (any kernel that is not
--                 communication, or a CUDA graph replay recorded whole), on any stream of the device
--   `copy`        memcpy and memset
--   `copy_hidden` the part of `copy` during which any kernel (or graph replay) ran too
--   `host_copy`   the copies between host and device memory alone (is_host_copy, 00_macros.sql): a part of `copy`
--   `host_copy_hidden` the part of `host_copy` during which any kernel (or graph replay) ran too
-- With gpu_busy (any op), a window's time on the device splits exactly: exposed communication = comm -
-- comm_hidden, copy only = copy - copy_hidden, compute = busy - exposed - copy only, idle = wall - busy.
-- How: communication and copies are few; compute kernels are most of a profile. The compute side is never sorted
-- or merged as a whole: only the kernels that share a bucket of time with a copy or communication stretch
-- (found by hash joins on the bucket number; kernels spanning 3+ buckets are listed in all of theirs) are
-- clipped to those stretches and merged. A bucket is 1 ms, or 1/2^20 of the device's span when that is longer,
-- so that no interval, however long its timestamps say it is, spans more than 2^20 + 1 buckets. The bucket size
-- changes the cost, never the result.
CREATE OR REPLACE MACRO device_layers(
  -- INTEGER: the device (gpu_ops.device_id), or NULL for every device
  device
)
-- TABLE(device_id INTEGER, layer VARCHAR, start_ns, end_ns, busy_before_ns): union_stretches' rows per device
-- and layer (see union_stretches for busy_before_ns)
AS TABLE
WITH ops AS (  -- class: copy, comm or compute; ops of no length cover nothing
  SELECT device_id, start_ns, end_ns,
         CASE WHEN kind IN ('memcpy', 'memset') THEN 0
              WHEN name_id IN (SELECT name_id FROM kernel_classes WHERE category = 'communication') THEN 1
              ELSE 2 END AS class,
         is_host_copy(kind, copy_kind) AS host
  FROM gpu_ops
  WHERE device_id IS NOT NULL AND (device IS NULL OR device_id = device) AND end_ns > start_ns
), bucket AS (
  SELECT greatest(1000000, ((max(end_ns)::HUGEINT - min(start_ns)) // 1048576 + 1)::BIGINT) AS ns FROM ops
), sparse AS (  -- key: device * 3 + layer (0 copy, 1 comm, 2 host copy: a host copy is in both 0 and 2)
  SELECT device_id::BIGINT * 3 + class AS key, start_ns, end_ns FROM ops WHERE class < 2
  UNION ALL SELECT device_id::BIGINT * 3 + 2, start_ns, end_ns FROM ops WHERE host
), s AS (
  SELECT key, start_ns, end_ns, busy_before_ns FROM union_stretches(sparse)
), s_buckets AS (  -- every bucket each stretch touches
  SELECT key, key // 3 AS device_id, start_ns, end_ns,
         unnest(range(start_ns // bucket.ns, (end_ns - 1) // bucket.ns + 1)) AS b
  FROM s, bucket
), touched AS (
  SELECT DISTINCT device_id, b FROM s_buckets
), cand AS (  -- kernels that may overlap a stretch: they start or end in a touched bucket, or span 3+ buckets
               -- (one pass, two probes of the few touched buckets)
  SELECT o.device_id, o.start_ns, o.end_ns, o.class
  FROM ops o
  CROSS JOIN bucket
  LEFT JOIN touched t1 ON t1.device_id = o.device_id AND t1.b = o.start_ns // bucket.ns
  LEFT JOIN touched t2 ON t2.device_id = o.device_id AND t2.b = (o.end_ns - 1) // bucket.ns
  WHERE o.class > 0
    AND (t1.b IS NOT NULL OR t2.b IS NOT NULL OR (o.end_ns - 1) // bucket.ns - o.start_ns // bucket.ns >= 2)
), cand_buckets AS (
  SELECT cand.*, unnest(range(start_ns // bucket.ns, (end_ns - 1) // bucket.ns + 1)) AS b FROM cand, bucket
), pieces AS (  -- each such kernel clipped to each stretch it overlaps: any kernel hides a copy, a compute kernel
                -- hides communication
  SELECT DISTINCT s.key, greatest(c.start_ns, s.start_ns) AS start_ns, least(c.end_ns, s.end_ns) AS end_ns
  FROM cand_buckets c
  JOIN s_buckets s ON s.device_id = c.device_id AND s.b = c.b
  WHERE c.start_ns < s.end_ns AND c.end_ns > s.start_ns AND (s.key % 3 <> 1 OR c.class = 2)
)
SELECT (key // 3)::INTEGER AS device_id, ['copy', 'comm', 'host_copy'][key % 3 + 1] AS layer,
       start_ns, end_ns, busy_before_ns
FROM s
UNION ALL
SELECT (key // 3)::INTEGER, ['copy_hidden', 'comm_hidden', 'host_copy_hidden'][key % 3 + 1],
       start_ns, end_ns, busy_before_ns
FROM union_stretches(pieces);
