-- @include 00_macros.sql, 05_strings.sql, 25_calls.sql
-- @staging raw_enum_memkind, raw_graph, raw_kernel, raw_memcpy, raw_memset
-- @tables _calls, strings
-- @macros copy_kind_enum, copy_kinds, global_pid, is_interval
-- @defines _shared_calls, gpu_ops, gpu_ops_named
-- @empty_without _calls, raw_graph, raw_kernel, raw_memcpy, raw_memset

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

-- The ops of every kind, as the export has them: gpu_ops below, and the duplicate check after it, read them.
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

-- Which call launched each op, matched on (process, correlation id): at most one call per op, in time that
-- grows with the ops and calls whatever the ids, by this rule. CUPTI gives each call of a process its own id, and
-- an op takes the call of its id. Where several calls of a process share one id (a broken or hostile export),
-- those enclosed by an earlier call of the same id on the same thread are left out (some exports hold a runtime
-- call and the driver call inside it under one id: the outer call is the launch), and of the rest the op takes
-- the latest that starts at or before the op starts, or the earliest when all start after it (clocks apart).
-- data_quality counts the calls of ids left with several candidates (95_data_quality.sql). The calls come from
-- the staging view 25_calls.sql (not from api_calls, which this file would then wait for).
-- Grouping every call by its id costs a hash table as large as the calls (0.1 s CPU at 1M calls, more than
-- linearly beyond). nsys writes each process's calls with ids that grow, and the loader stages them in runs of
-- rowids (one per range read side by side, NSYSQL_READERS) in any order. In the order one scan gives, cut the
-- calls into runs where each call follows the one before it in rowid (call_id + 1: a gap, or a new range, starts
-- a run) with a key (pid, correlation_id) strictly above it. A run holds no key twice and lies within [its first
-- key, its last key]; when no two runs' spans overlap, no key is shared: one streaming pass and a sort of the
-- runs (a few, as a rule). Runs that overlap (threads whose calls are written out of order, say) or a NULL pid
-- leave the proof to the grouping. The runs' first calls, and the last call of all: row_number and lag in one
-- window (the same empty OVER clause: one operator, one order), kept in a table so that both reads below see
-- that one order.
CREATE OR REPLACE TEMP TABLE _call_runs AS
SELECT n, starts, (pid::HUGEINT << 64) + correlation_id AS k, (lp::HUGEINT << 64) + lc AS prev FROM (
  SELECT *, NOT coalesce(call_id = lcall + 1 AND (pid > lp OR (pid = lp AND correlation_id > lc)), false) AS starts
  FROM (SELECT call_id, pid, correlation_id, lag(call_id) OVER () AS lcall, lag(pid) OVER () AS lp,
               lag(correlation_id) OVER () AS lc, row_number() OVER () AS n
        FROM _calls WHERE correlation_id IS NOT NULL))
WHERE starts OR n = (SELECT count(*) FROM _calls WHERE correlation_id IS NOT NULL);

CREATE OR REPLACE TEMP TABLE _shared_ids AS  -- (pid, correlation_id) of more than one call: none, as a rule
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

-- op_id -> call_id for the ops whose (pid, correlation_id) is shared, by the rule above
CREATE OR REPLACE TEMP TABLE _shared_launch AS
WITH first AS (  -- the earliest candidate per (pid, correlation_id)
  SELECT pid, correlation_id, arg_min(call_id, (start_ns, call_id)) AS call_id FROM _shared_calls GROUP BY ALL
), linked AS (
  SELECT o.op_id, s.pid, s.correlation_id, o.start
  FROM _ops o JOIN _shared_ids s ON s.pid = global_pid(o.globalPid) AND s.correlation_id = o.correlationId
)
SELECT o.op_id, coalesce(c.call_id, f.call_id) AS call_id
FROM linked o
ASOF LEFT JOIN _shared_calls c ON c.pid = o.pid AND c.correlation_id = o.correlation_id AND o.start >= c.start_ns
LEFT JOIN first f ON c.call_id IS NULL AND f.pid = o.pid AND f.correlation_id = o.correlation_id;

-- The calls as the join below matches them: on (pid, correlation_id, pick), where pick is 0 for an id of one
-- call and the call's own id where the id is shared, so that no op meets more than one call.
CREATE OR REPLACE TEMP VIEW _launch_calls AS
SELECT c.*, CASE WHEN s.pid IS NULL THEN 0 ELSE c.call_id END AS pick
FROM _calls c LEFT JOIN _shared_ids s ON s.pid = c.pid AND s.correlation_id = c.correlation_id;

-- Each valid op (is_interval) with its call, if any: one row per op. The calls (18M rows at 10M kernels) stream
-- past a hash table of the ops' keys (4 columns), and gpu_ops below streams the ops past this table (6 columns):
-- each hash table holds one narrow row per op, never one per call nor every op column. One join of the wide ops
-- with the calls built one side whole (the calls at 2M kernels, the 16-column ops at 10M), more than DuckDB's
-- share of the 2 GB budget at 10M kernels: it spilled (that statement 9.2 s CPU; these two 6.1 s).
CREATE OR REPLACE TEMP TABLE _op_launch AS
SELECT o.op_id, a.call_id, a.tid, a.start_ns, a.end_ns, a.name_id
FROM _launch_calls a
RIGHT JOIN (
  SELECT o.op_id, global_pid(o.globalPid) AS pid, o.correlationId AS correlation_id, coalesce(l.call_id, 0) AS pick
  FROM _ops o LEFT JOIN _shared_launch l ON l.op_id = o.op_id
  WHERE is_interval(o.start, o."end")
) o ON a.pid = o.pid AND a.correlation_id = o.correlation_id AND a.pick = o.pick;

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
  -- CUPTI correlation id (unique per process)
  o.correlationId AS correlation_id,
  -- api_calls.call_id of the call that launched it, matched on (pid, correlation_id); NULL if not traced
  a.call_id AS api_call_id,
  -- thread that launched it
  a.tid AS api_tid,
  -- launch call start, ns
  a.start_ns AS api_start_ns,
  -- launch call end, ns
  a.end_ns AS api_end_ns,
  -- strings.id of the launch call's name, e.g. `cudaLaunchKernel_v7000`, `cudaGraphLaunch_v10000`
  a.name_id AS api_name_id
FROM _ops o
-- the launching call: one at most per op (_shared_launch above), so that an id shared by many calls (a broken or
-- hostile export) costs no more than unique ones. _op_launch holds the ops that are intervals of GPU time
-- (is_interval), each once: an op without a start or an end, ending before it starts, or at a time beyond any
-- clock, is dropped (data_quality counts them, 95_data_quality.sql), so that no duration and no busy time is ever
-- negative or overflows. (The join filters them, not a WHERE here: DuckDB would then guess the ops fewer than
-- _op_launch's rows and build its hash table of the wide ops.)
JOIN _op_launch a ON a.op_id = o.op_id;
DROP TABLE _op_launch;

-- gpu_ops with its names spelled out: every gpu_ops column, then name, short_name, mangled_name, api_name.
CREATE OR REPLACE VIEW gpu_ops_named AS
SELECT
  -- every column of gpu_ops (op_id, kind, start_ns, ... as documented there)
  o.*,
  -- the text of name_id: the demangled kernel name, or `[CUDA memcpy Host-to-Device]`, `[CUDA memset]`, ...
  n.value AS name,
  -- the text of short_name_id: the kernel's short (base) name
  sn.value AS short_name,
  -- the text of mangled_name_id
  mn.value AS mangled_name,
  -- the text of api_name_id: the launching call, e.g. `cudaLaunchKernel_v7000`
  an.value AS api_name
FROM gpu_ops o
LEFT JOIN strings n ON n.id = o.name_id
LEFT JOIN strings sn ON sn.id = o.short_name_id
LEFT JOIN strings mn ON mn.id = o.mangled_name_id
LEFT JOIN strings an ON an.id = o.api_name_id;
