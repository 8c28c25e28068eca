-- @include 00_macros.sql
-- @staging raw_enum_memkind, raw_graph, raw_kernel, raw_memcpy, raw_memset
-- @macros copy_kind_enum, copy_kinds, global_pid, is_interval
-- @defines gpu_ops
-- @empty_without raw_graph, raw_kernel, raw_memcpy, raw_memset

-- nsysql canonical schema v1: work the GPU did.
-- GPU work = kernels, memcpy, memset and CUDA graph launches that nsys recorded only as whole graphs
-- (`--cuda-graph-trace=graph`, CUPTI_ACTIVITY_KIND_GRAPH_TRACE), so a graph replay is GPU time, never idle.
-- `kind` and the memory-copy labels are ENUMs, not strings: one byte a row through the analyses' sorts and
-- joins and no string compression when the entry is written. An ENUM compares with a string literal as a string does (`kind = 'kernel'`).

-- Memory kinds (srcKind, dstKind, memKind): by the export's own ENUM_CUDA_MEM_KIND when it has one (2022.4 and
-- later), else by nsys's numbering, which every nsys version has stored (never CUPTI's CUpti_ActivityMemoryKind,
-- where 0 is Unknown and 1 Pageable). The evidence, from the exports without the enum (2020.3.4 to 2022.2.1 in
-- ../shared/nsys-exports/public): every host-to-device copy has dstKind 2 and every device-to-host copy srcKind 2,
-- and every memset memKind 2, which is Device in nsys's numbering and Pinned in CUPTI's; nsys 2021.1's own stats
-- scripts (reports/nsysreport.py, MEM_KIND_STRS_CTE) decode 0 Pageable, 1 Pinned, 2 Device, 3 Array, 4 Unknown,
-- as ENUM_CUDA_MEM_KIND does ids 0-3 in every later export. Ids 0-3 therefore mean the same in every version.
-- Above 3 the numberings nsys shipped before its enum disagree (2021.1's scripts: 4 Unknown; the enum: 4
-- Managed, 5 Device Static, 6 Managed Static, 7 Unknown) and no export at hand shows which one a version used,
-- so without the enum they are Unknown.
CREATE OR REPLACE TEMP TABLE _mem_kind AS
SELECT id, CASE WHEN label ILIKE '%pageable%' THEN 'Pageable' WHEN label ILIKE '%pinned%' THEN 'Pinned'
  WHEN label ILIKE '%managed%' THEN 'Managed' WHEN label ILIKE '%device%' THEN 'Device'
  WHEN label ILIKE '%array%' THEN 'Array' ELSE 'Unknown' END AS label
FROM (SELECT id, label FROM raw_enum_memkind
      UNION ALL
      SELECT * FROM (VALUES (0, 'Pageable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array')) v(id, label)
      WHERE NOT EXISTS (SELECT 1 FROM raw_enum_memkind));

-- The ops of every kind, as the export has them: gpu_ops below reads them.
CREATE OR REPLACE TEMP VIEW _ops AS
SELECT k.row_id AS op_id,
       'kernel' AS kind, k.start, k."end", k.deviceId, k.streamId, k.correlationId, k.globalPid,
       k.demangledName AS name_id, coalesce(k.shortName, k.demangledName) AS short_name_id,
       coalesce(k.mangledName, k.demangledName) AS mangled_name_id,
       NULL::BIGINT AS bytes, NULL::VARCHAR AS copy_kind, NULL::VARCHAR AS src_kind, NULL::VARCHAR AS dst_kind,
       k.graphNodeId
FROM raw_kernel k
UNION ALL
SELECT m.row_id + (SELECT coalesce(max(row_id), 0) FROM raw_kernel),
       'memcpy', m.start, m."end", m.deviceId, m.streamId, m.correlationId, m.globalPid,
       -1 - coalesce(ck.id, 0), NULL, NULL,
       m.bytes, coalesce(ck.label, 'Unknown'),
       -- a kind the numbering does not name is Unknown; NULL only where the export has no such column
       CASE WHEN m.srcKind IS NOT NULL THEN coalesce(sk.label, 'Unknown') END,
       CASE WHEN m.dstKind IS NOT NULL THEN coalesce(dk.label, 'Unknown') END, m.graphNodeId
FROM raw_memcpy m
LEFT JOIN copy_kinds() ck ON ck.id = m.copyKind
LEFT JOIN _mem_kind sk ON sk.id = m.srcKind
LEFT JOIN _mem_kind dk ON dk.id = m.dstKind
UNION ALL
SELECT s.row_id + (SELECT coalesce(max(row_id), 0) FROM raw_kernel) + (SELECT coalesce(max(row_id), 0) FROM raw_memcpy),
       'memset', s.start, s."end", s.deviceId, s.streamId, s.correlationId, s.globalPid,
       -100, NULL, NULL, s.bytes, NULL, NULL,
       CASE WHEN s.memKind IS NOT NULL THEN coalesce(mk.label, 'Unknown') END, s.graphNodeId
FROM raw_memset s
LEFT JOIN _mem_kind mk ON mk.id = s.memKind
UNION ALL
SELECT g.row_id + (SELECT coalesce(max(row_id), 0) FROM raw_kernel) + (SELECT coalesce(max(row_id), 0) FROM raw_memcpy)
         + (SELECT coalesce(max(row_id), 0) FROM raw_memset),
       'graph', g.start, g."end", g.deviceId, g.streamId, g.correlationId, g.globalPid,
       coalesce(-1000 - g.graphId, -999), NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM raw_graph g;

-- One row per GPU operation, whatever its kind.
CREATE OR REPLACE TABLE gpu_ops AS
SELECT
  -- unique id, stable across loads of the same export: the kernel's SQLite rowid in the export; memcpy, memset
  -- and graph rows follow, offset by the largest rowid of the kinds before them. op_ranges.op_id points here
  o.op_id,
  -- `kernel`, `memcpy`, `memset` or `graph` (a whole CUDA graph replay recorded with --cuda-graph-trace=graph)
  o.kind::ENUM('kernel', 'memcpy', 'memset', 'graph') AS kind,
  -- CUDA device id (devices.device_id)
  o.deviceId AS device_id,
  -- CUDA stream id
  o.streamId AS stream_id,
  -- process that owns the work
  global_pid(o.globalPid) AS pid,
  -- GPU start, ns on the export's clock
  o.start AS start_ns,
  -- GPU end, ns
  o."end" AS end_ns,
  -- end_ns - start_ns
  o."end" - o.start AS duration_ns,
  -- strings.id of the kernel's demangled name (nsys's default), or of nsysql's label for other kinds:
  -- `[CUDA memcpy Host-to-Device]`, `[CUDA memset]`, `[CUDA graph 1]`
  o.name_id,
  -- strings.id of the kernel short (base) name; the name_id for other kinds
  coalesce(o.short_name_id, o.name_id) AS short_name_id,
  -- strings.id of the mangled name (the demangled one where the export has no mangledName column, before 2022)
  coalesce(o.mangled_name_id, o.name_id) AS mangled_name_id,
  -- bytes copied or set; NULL for kernels
  o.bytes,
  -- memcpy direction, e.g. `Host-to-Device`; NULL for other kinds
  o.copy_kind::copy_kind_enum AS copy_kind,
  -- memcpy source memory: `Pageable`, `Pinned`, `Device`, `Managed`, `Array`, `Unknown`
  o.src_kind::ENUM('Pageable', 'Pinned', 'Device', 'Managed', 'Array', 'Unknown') AS src_kind,
  -- memcpy destination memory, or memset target memory
  o.dst_kind::ENUM('Pageable', 'Pinned', 'Device', 'Managed', 'Array', 'Unknown') AS dst_kind,
  -- CUDA graph node id when the op ran as part of a graph (--cuda-graph-trace=node), else NULL
  o.graphNodeId AS graph_node_id,
  -- CUPTI correlation id (unique per process): with pid, what ties the op to the call that launched it
  -- (op_launch, 42_op_launch.sql)
  o.correlationId AS correlation_id
FROM _ops o
-- an op without a start or an end, ending before it starts, or at a time beyond any clock (is_interval), is
-- dropped (data_quality counts them, 95_data_quality.sql), so that no duration and no busy time is ever negative
-- or overflows
WHERE is_interval(o.start, o."end");
