-- nsysql canonical schema v1: which NVTX ranges each GPU operation belongs to.
--
-- Thread rule (exactly nsys's): an op belongs to every range that was open on the thread that launched it
-- when the launching API call started (range start <= call start < range end). A start/end range counts on
-- the thread that opened it and on the thread that closed it.
-- Process rule (nsysql's addition, on top of the thread rule): an op whose launching thread had no range open
-- then inherits the ranges open at that instant on the other threads of the same process. PyTorch launches
-- backward kernels from its autograd thread, which has no ranges: under the process rule they land in the
-- `Backward Pass` (and `Batch`) range the main thread has open.

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

CREATE OR REPLACE TEMP TABLE _thread_match AS
WITH inner_pp AS (
  SELECT l.op_id, s.range_id
  FROM _launched l
  ASOF JOIN nvtx_open s ON l.pid = s.pid AND l.api_tid = s.tid AND l.api_start_ns >= s.ts_ns
  WHERE s.range_id IS NOT NULL
)
SELECT i.op_id, a.anc_id AS range_id FROM inner_pp i JOIN _ancestors a ON a.range_id = i.range_id
UNION ALL  -- no duplicates: push/pop ancestors here, start/end ranges below, each (op, range) once
SELECT l.op_id, r.range_id
FROM _launched l
JOIN nvtx_ranges r
  ON r.style = 'StartEnd' AND r.pid = l.pid AND l.api_start_ns >= r.start_ns AND l.api_start_ns < r.end_ns
 AND (l.api_tid = r.tid OR l.api_tid = r.end_tid);

CREATE OR REPLACE TEMP TABLE _orphans AS
SELECT l.* FROM _launched l ANTI JOIN _thread_match t ON t.op_id = l.op_id;

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
SELECT i.op_id, a.anc_id AS range_id FROM inner_pp i JOIN _ancestors a ON a.range_id = i.range_id
UNION ALL  -- no duplicates: push/pop ancestors here, start/end ranges below, each (op, range) once
SELECT o.op_id, r.range_id
FROM _orphans o
JOIN nvtx_ranges r
  ON r.style = 'StartEnd' AND r.pid = o.pid AND o.api_start_ns >= r.start_ns AND o.api_start_ns < r.end_ns;

-- One row per (GPU op, enclosing NVTX range).
CREATE OR REPLACE TABLE op_ranges AS
WITH m AS (
  SELECT op_id, range_id, 'thread' AS via FROM _thread_match
  UNION ALL
  SELECT op_id, range_id, 'process' FROM _process_match
)
SELECT
  -- gpu_ops.op_id
  m.op_id,
  -- nvtx_ranges.range_id of a range enclosing the op's launch
  m.range_id,
  -- `thread`: the range was open on the launching thread (nsys's rule); `process`: inherited from another
  -- thread of the process because the launching thread had none open (nsysql's process rule); an ENUM,
  -- compared like a string (`via = 'thread'`), as gpu_ops.kind
  m.via::ENUM('thread', 'process') AS via
FROM m;
