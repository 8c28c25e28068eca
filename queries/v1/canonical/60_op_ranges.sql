-- nsysql canonical schema v1: which NVTX ranges each GPU operation belongs to.
--
-- Thread rule (exactly nsys's): an op belongs to every range that was open on the thread that launched it
-- when the launching API call started (range start <= call start < range end). A start/end range counts on
-- the thread that opened it and on the thread that closed it.
-- Process rule (nsysql's addition, on top of the thread rule): an op whose launching thread had no user range
-- open then (none, or only library ranges: see _library_ranges) also inherits the user ranges open at that
-- instant on the other threads of the same process. PyTorch launches backward kernels from its autograd thread,
-- which has no ranges of its own, or only a library's (CCCL's `cub::DeviceRadixSort` around a sort, NCCL's
-- `ncclAllReduce`): under the process rule they land in the `Backward Pass` (and `Batch`) range the main thread
-- has open, and in the library's range too.

-- Every push/pop range with itself and all its enclosing ranges.
CREATE OR REPLACE TEMP TABLE _ancestors AS
WITH RECURSIVE a(range_id, anc_id, parent_id) AS (
  SELECT range_id, range_id, parent_id FROM nvtx_ranges WHERE style = 'PushPop'
  UNION ALL
  SELECT a.range_id, r.range_id, r.parent_id FROM a JOIN nvtx_ranges r ON r.range_id = a.parent_id
)
SELECT range_id, anc_id FROM a;

CREATE OR REPLACE TEMP VIEW _launched AS
SELECT op_id, pid, api_tid, api_start_ns FROM gpu_ops WHERE api_start_ns IS NOT NULL;

-- Each launched op with the innermost push/pop range open on its launching thread when the call started
-- (NULL: none was open).
CREATE OR REPLACE TEMP TABLE _inner AS
SELECT l.op_id, l.pid, l.api_tid, l.api_start_ns, s.range_id
FROM _launched l
ASOF LEFT JOIN nvtx_open s ON l.pid = s.pid AND l.api_tid = s.tid AND l.api_start_ns >= s.ts_ns;

-- Start/end ranges open on the launching thread (the thread that opened the range, or the one that closed it).
CREATE OR REPLACE TEMP TABLE _start_end AS
SELECT l.op_id, r.range_id
FROM _launched l
JOIN nvtx_ranges r
  ON r.style = 'StartEnd' AND r.pid = l.pid AND l.api_start_ns >= r.start_ns AND l.api_start_ns < r.end_ns
 AND (l.api_tid = r.tid OR l.api_tid = r.end_tid);

-- Library ranges: the NVTX domains of libraries, which open ranges on whatever thread calls them; such a range
-- names the library's work, never the user's phase (a domain is the one thing that tells them apart). PyTorch's
-- emit_nvtx ranges (is_torch_range) are in the default domain but are of the same kind: with them, the autograd
-- thread's backward kernels still inherit the user's `Backward Pass`, as they do without emit_nvtx.
CREATE OR REPLACE TEMP TABLE _library_ranges AS
SELECT range_id FROM nvtx_ranges
WHERE lower(domain) IN ('cccl', 'nccl', 'cublas', 'cublaslt', 'cudnn', 'cufft', 'cusparse', 'cusolver', 'curand',
                        'cutensor', 'tensorrt', 'myelin-exec', 'mpi', 'nvshmem', 'ucx', 'libcudf', 'rmm', 'dali')
   OR is_torch_range(name);

-- Push/pop ranges whose every enclosing range (itself included) is a library's: innermost on the launching
-- thread, such a range leaves the op without a user range.
CREATE OR REPLACE TEMP TABLE _library_only AS
SELECT range_id FROM _ancestors
WHERE range_id IN (SELECT range_id FROM _library_ranges)
GROUP BY range_id
HAVING bool_and(anc_id IN (SELECT range_id FROM _library_ranges));

-- Ops whose launching thread had no user range open: the process rule's candidates.
CREATE OR REPLACE TEMP TABLE _orphans AS
SELECT op_id, pid, api_tid, api_start_ns FROM _inner i
WHERE (range_id IS NULL OR range_id IN (SELECT range_id FROM _library_only))
  AND NOT EXISTS (SELECT 1 FROM _start_end e WHERE e.op_id = i.op_id
                  AND e.range_id NOT IN (SELECT range_id FROM _library_ranges));

CREATE OR REPLACE TEMP TABLE _process_match AS
WITH range_threads AS (
  SELECT DISTINCT pid, tid FROM nvtx_ranges WHERE style = 'PushPop'
), probe AS (
  SELECT o.op_id, o.pid, rt.tid, o.api_start_ns
  FROM _orphans o JOIN range_threads rt ON rt.pid = o.pid AND rt.tid <> o.api_tid
), inner_pp AS (
  SELECT p.op_id, s.range_id
  FROM probe p
  ASOF JOIN nvtx_open s ON p.pid = s.pid AND p.tid = s.tid AND p.api_start_ns >= s.ts_ns
  WHERE s.range_id IS NOT NULL
)
-- only user ranges are inherited, so none is also a thread-rule range of the op: each (op, range) once
SELECT i.op_id, a.anc_id AS range_id FROM inner_pp i JOIN _ancestors a ON a.range_id = i.range_id
WHERE a.anc_id NOT IN (SELECT range_id FROM _library_ranges)
UNION ALL  -- no duplicates: push/pop ancestors here, start/end ranges below, each (op, range) once
SELECT o.op_id, r.range_id
FROM _orphans o
JOIN nvtx_ranges r
  ON r.style = 'StartEnd' AND r.pid = o.pid AND o.api_start_ns >= r.start_ns AND o.api_start_ns < r.end_ns
WHERE r.range_id NOT IN (SELECT range_id FROM _library_ranges);

-- One row per (GPU op, enclosing NVTX range).
CREATE OR REPLACE TABLE op_ranges AS
WITH m AS (  -- no duplicates: push/pop ancestors, start/end ranges, then the process rule's, each (op, range) once
  SELECT i.op_id, a.anc_id AS range_id, 'thread' AS via FROM _inner i JOIN _ancestors a ON a.range_id = i.range_id
  UNION ALL
  SELECT op_id, range_id, 'thread' FROM _start_end
  UNION ALL
  SELECT op_id, range_id, 'process' FROM _process_match
)
SELECT
  -- gpu_ops.op_id
  m.op_id,
  -- nvtx_ranges.range_id of a range enclosing the op's launch
  m.range_id,
  -- `thread`: the range was open on the launching thread (nsys's rule); `process`: inherited from another
  -- thread of the process because the launching thread had no user range open, only library ranges or none
  -- (nsysql's process rule); an ENUM,
  -- compared like a string (`via = 'thread'`), as gpu_ops.kind
  m.via::ENUM('thread', 'process') AS via
FROM m;
