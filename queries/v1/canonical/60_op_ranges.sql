-- @include 00_macros.sql, 40_gpu_ops.sql, 42_op_launch.sql, 50_nvtx.sql, 55_graph_nodes.sql
-- @tables gpu_ops, graph_nodes, nvtx_open, nvtx_ranges, op_launch
-- @macros is_torch_range
-- @defines op_range_links, op_range_totals, op_ranges, range_chains
-- @empty_without gpu_ops
-- @empty_without nvtx_open, nvtx_ranges

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
-- Capture rule (nsysql's, with the process rule): a GPU op replayed from an instantiated CUDA graph
-- (--cuda-graph-trace=node: gpu_ops.graph_node_id) also belongs to the ranges open on the thread that created its
-- node, when it created it (graph_nodes: the node the program captured, behind the copy that ran), as the
-- `layer 3` around a captured layer; its launch (`graph.replay()` in `step 7`) keeps it under the rules above.

-- Push/pop ranges as a tree in pre-order: `pre` numbers them per thread by start, longer first (an enclosing
-- range before the ranges it encloses), and `last` is the pre of the last range of the thread that starts before
-- this one ends. Push/pop ranges nest, so a range's descendants are the ranges numbered pre + 1 to last, and the
-- ranges enclosing a range numbered p (itself included) are those with pre <= p <= last: an interval join
-- (DuckDB's IEJoin), in time that grows with the ranges and the pairs it finds, whatever the depth. Threads
-- are numbered apart (pre runs on from one thread to the next), so that no pair is of two threads.
CREATE OR REPLACE TEMP TABLE _pp_order AS
SELECT range_id, pid, tid, start_ns, end_ns,
       row_number() OVER (ORDER BY pid, tid, start_ns, end_ns DESC, range_id) AS pre
FROM nvtx_ranges WHERE style = 'PushPop';

CREATE OR REPLACE TEMP TABLE _pp_tree AS
WITH upto AS (  -- per thread and start time, the last pre of the ranges starting then
  SELECT pid, tid, start_ns, max(pre) AS upto FROM _pp_order GROUP BY ALL
)
SELECT o.range_id, o.pre, greatest(o.pre, u.upto) AS last
FROM _pp_order o
ASOF LEFT JOIN upto u ON u.pid = o.pid AND u.tid = o.tid AND o.end_ns > u.start_ns;

-- The ops with a traced launch, once: the statements below read them four times. (op_launch's ops are gpu_ops';
-- the EXISTS says so, for @empty_without.)
CREATE OR REPLACE TEMP TABLE _launched AS
SELECT op_id, api_pid AS pid, api_tid, api_start_ns FROM op_launch WHERE EXISTS (SELECT 1 FROM gpu_ops);

-- Each launched op with the innermost push/pop range open on its launching thread when the call started
-- (NULL: none was open): the thread's nvtx_open row at or before the call's start. How, as ops_by_iteration
-- places ops in iterations (00_macros.sql): each row holds until its thread's next one (the last, past every
-- launch), and the ops meet these steps in a hash join on (process, thread, time bucket), each step listed in
-- every bucket it touches, rather than an ASOF join that sorts every op; the ops of a bucket that more than 8 of
-- a thread's steps touch (a deep nesting opened at once) take the ASOF join, so that time stays linear.
CREATE OR REPLACE TEMP TABLE _inner AS
WITH steps AS (
  SELECT pid, tid, ts_ns AS a, range_id,
         coalesce(lead(ts_ns) OVER (PARTITION BY pid, tid ORDER BY ts_ns),
                  (SELECT max(api_start_ns) + 1 FROM _launched)) AS b
  FROM nvtx_open
), width AS (  -- the steps' median length, or more where that would make more than about 4 buckets a step
  SELECT greatest(median(b - a)::BIGINT, (sum(b - a) // (4 * count(*) + 1))::BIGINT, 1) AS w FROM steps WHERE b > a
), listed AS (
  SELECT s.*, unnest(range(s.a // w, (s.b - 1) // w + 1)) AS bucket FROM steps s, width WHERE s.b > s.a
), crowded AS (
  SELECT pid, tid, bucket FROM listed GROUP BY ALL HAVING count(*) > 8
)
SELECT l.op_id, l.pid, l.api_tid, l.api_start_ns, i.range_id
FROM (SELECT * FROM (SELECT *, api_start_ns // (SELECT w FROM width) AS bucket FROM _launched) x
      ANTI JOIN crowded c ON c.pid = x.pid AND c.tid = x.api_tid AND c.bucket = x.bucket) l
LEFT JOIN listed i
  ON i.pid = l.pid AND i.tid = l.api_tid AND i.bucket = l.bucket AND l.api_start_ns >= i.a AND l.api_start_ns < i.b
UNION ALL
SELECT l.op_id, l.pid, l.api_tid, l.api_start_ns, s.range_id
FROM (SELECT * FROM (SELECT *, api_start_ns // (SELECT w FROM width) AS bucket FROM _launched) x
      SEMI JOIN crowded c ON c.pid = x.pid AND c.tid = x.api_tid AND c.bucket = x.bucket) l
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

-- The enclosing ranges (itself included) of each push/pop range that is innermost on a launching thread.
CREATE OR REPLACE TEMP TABLE _inner_chains AS
SELECT x.range_id AS inner_id, t.range_id
FROM (SELECT p.range_id, p.pre FROM _pp_tree p SEMI JOIN _inner i USING (range_id)) x
JOIN _pp_tree t ON t.pre <= x.pre AND x.pre <= t.last;

-- Push/pop ranges whose every enclosing range (itself included) is a library's: innermost on the launching
-- thread, such a range leaves the op without a user range.
CREATE OR REPLACE TEMP TABLE _library_only AS
SELECT inner_id AS range_id FROM _inner_chains
WHERE inner_id IN (SELECT range_id FROM _library_ranges)
GROUP BY inner_id
HAVING bool_and(range_id IN (SELECT range_id FROM _library_ranges));

-- Ops whose launching thread had no user range open: the process rule's candidates.
CREATE OR REPLACE TEMP TABLE _orphans AS
SELECT op_id, pid, api_tid, api_start_ns FROM _inner i
WHERE (range_id IS NULL OR range_id IN (SELECT range_id FROM _library_only))
  AND NOT EXISTS (SELECT 1 FROM _start_end e WHERE e.op_id = i.op_id
                  AND e.range_id NOT IN (SELECT range_id FROM _library_ranges));

-- The process rule's innermost push/pop range of each orphan op on each other thread of its process that has
-- one open when the call started (its user ancestors are inherited: op_ranges), and the start/end user ranges
-- open then on any thread of the process.
CREATE OR REPLACE TEMP TABLE _process_inner AS
WITH range_threads AS (
  SELECT DISTINCT pid, tid FROM nvtx_ranges WHERE style = 'PushPop'
), probe AS (
  SELECT o.op_id, o.pid, rt.tid, o.api_start_ns
  FROM _orphans o JOIN range_threads rt ON rt.pid = o.pid AND rt.tid <> o.api_tid
)
SELECT p.op_id, s.range_id
FROM probe p
ASOF JOIN nvtx_open s ON p.pid = s.pid AND p.tid = s.tid AND p.api_start_ns >= s.ts_ns
WHERE s.range_id IS NOT NULL;

-- The capture rule's ranges: per graph node op whose node has a creator (graph_nodes), every range open on the
-- creating thread when the node was created (a push/pop range and those enclosing it, or a start/end range that
-- thread opened or closed), less those the op's launch already gives it (open then on the launching thread, or
-- user ranges inherited under the process rule): each (op, range) once. Nodes are looked up once per creation
-- instant, not once per replay.
CREATE OR REPLACE TEMP TABLE _captured AS
WITH made AS (  -- the creation instants of the nodes that ran ops
  SELECT DISTINCT pid, created_tid AS tid, created_ns FROM graph_nodes
  WHERE created_ns IS NOT NULL AND original_id IS NOT NULL
), inner_at AS (  -- the innermost push/pop range open then
  SELECT m.pid, m.tid, m.created_ns, s.range_id
  FROM made m ASOF JOIN nvtx_open s ON m.pid = s.pid AND m.tid = s.tid AND m.created_ns >= s.ts_ns
  WHERE s.range_id IS NOT NULL
), open_at AS (  -- it and the ranges enclosing it, and the start/end ranges open on the thread
  SELECT i.pid, i.tid, i.created_ns, t.range_id
  FROM inner_at i JOIN _pp_tree x ON x.range_id = i.range_id JOIN _pp_tree t ON t.pre <= x.pre AND x.pre <= t.last
  UNION ALL
  SELECT m.pid, m.tid, m.created_ns, r.range_id
  FROM made m JOIN nvtx_ranges r
    ON r.style = 'StartEnd' AND r.pid = m.pid AND m.created_ns >= r.start_ns AND m.created_ns < r.end_ns
   AND (m.tid = r.tid OR m.tid = r.end_tid)
)
SELECT o.op_id, a.range_id
FROM gpu_ops o
LEFT JOIN op_launch l ON l.op_id = o.op_id
JOIN graph_nodes g ON g.pid = o.pid AND g.graph_node_id = o.graph_node_id AND g.original_id IS NOT NULL
JOIN open_at a ON a.pid = g.pid AND a.tid = g.created_tid AND a.created_ns = g.created_ns
JOIN nvtx_ranges r ON r.range_id = a.range_id
WHERE NOT (  -- given by the launch already: open at the launch on its thread, or inherited by an orphan op
  l.api_start_ns IS NOT NULL AND l.api_start_ns >= r.start_ns AND l.api_start_ns < r.end_ns
  AND (l.api_tid = r.tid OR (r.style = 'StartEnd' AND l.api_tid = r.end_tid)
       OR (o.op_id IN (SELECT op_id FROM _orphans) AND r.range_id NOT IN (SELECT range_id FROM _library_ranges))));

-- Which ranges each GPU op belongs to, stored without listing every enclosing push/pop range of every op (a
-- profile nested 20,000 deep would list each op 20,000 times): one row per op and innermost push/pop range
-- (`expand`: the op belongs to that range and every range enclosing it, range_chains), and one per op and
-- start/end range. The view op_ranges lists the pairs; analyses that only aggregate over them (ranges.sql)
-- aggregate these rows per innermost range first, and then over the enclosing ranges.
CREATE OR REPLACE TABLE op_range_links AS
WITH m AS (  -- no duplicates: the thread rule's innermost and start/end ranges, then the process rule's
  SELECT op_id, range_id, 'thread' AS via, true AS expand FROM _inner WHERE range_id IS NOT NULL
  UNION ALL
  SELECT op_id, range_id, 'thread', false FROM _start_end
  UNION ALL
  SELECT op_id, range_id, 'process', true FROM _process_inner
  UNION ALL  -- only user ranges are inherited, so none is also a thread-rule range of the op: each (op, range) once
  SELECT o.op_id, r.range_id, 'process', false
  FROM _orphans o
  JOIN nvtx_ranges r
    ON r.style = 'StartEnd' AND r.pid = o.pid AND o.api_start_ns >= r.start_ns AND o.api_start_ns < r.end_ns
  WHERE r.range_id NOT IN (SELECT range_id FROM _library_ranges)
  UNION ALL  -- none is a launch's range of the op (_captured)
  SELECT op_id, range_id, 'capture', false FROM _captured
)
SELECT
  -- gpu_ops.op_id
  m.op_id,
  -- nvtx_ranges.range_id: with expand, the innermost push/pop range open on the thread (range_chains lists
  -- it and the ranges enclosing it); else a start/end range open on it, or (via `capture`) any range open on
  -- the thread that created the op's graph node
  m.range_id,
  -- `thread`, `process` or `capture`, as op_ranges.via
  m.via::ENUM('thread', 'process', 'capture') AS via,
  -- true: the op belongs to range_id and to every range enclosing it (under `process`, every user range:
  -- range_chains.library false); false: to range_id alone
  m.expand
FROM m;

-- Each push/pop range of op_range_links with every push/pop range enclosing it, itself included.
CREATE OR REPLACE TABLE range_chains AS
WITH x AS (
  SELECT p.range_id, p.pre FROM _pp_tree p SEMI JOIN (SELECT range_id FROM op_range_links WHERE expand) USING (range_id)
)
SELECT
  -- nvtx_ranges.range_id of an innermost range (op_range_links.range_id)
  x.range_id AS inner_id,
  -- nvtx_ranges.range_id of a range enclosing it, or itself
  t.range_id,
  -- whether range_id is a library's range (an NVTX domain of a library, or PyTorch's own): not inherited under
  -- the process rule
  t.range_id IN (SELECT range_id FROM _library_ranges) AS library
FROM x
JOIN _pp_tree t ON t.pre <= x.pre AND x.pre <= t.last;

-- One row per (GPU op, enclosing NVTX range).
CREATE OR REPLACE VIEW op_ranges AS
SELECT
  -- gpu_ops.op_id
  m.op_id,
  -- nvtx_ranges.range_id of a range enclosing the op's launch (via `capture`: the creation of its graph node)
  m.range_id,
  -- `thread`: the range was open on the launching thread (nsys's rule); `process`: inherited from another
  -- thread of the process because the launching thread had no user range open, only library ranges or none
  -- (nsysql's process rule); `capture`: the op ran from a CUDA graph node created while the range was open on
  -- the creating thread, and its launch was outside the range (the capture rule, counted with `process`); an ENUM,
  -- compared like a string (`via = 'thread'`), as gpu_ops.kind
  m.via
FROM (
  SELECT l.op_id, c.range_id, l.via
  FROM op_range_links l JOIN range_chains c ON c.inner_id = l.range_id
  WHERE l.expand AND (l.via = 'thread' OR NOT c.library)
  UNION ALL
  SELECT op_id, range_id, via FROM op_range_links WHERE NOT expand
) m;

-- Per range: its GPU ops under `attribution` ('thread': nsys's rule; 'process': all rules, as op_ranges.via):
-- how many, the first start, the last end, their summed duration, and the GPU-projected time (proj_ns): the
-- first-to-last span of the ops, taken apart for each replay of a CUDA graph whose nodes the range captured
-- (capture rule: the ops of one graph launch, one correlation id), so that a `layer 3` captured once and
-- replayed 30 times projects 30 spans of its own kernels, not one span over the 30 replays and everything between
-- them. captured_ns: the part of total_ns that came by the capture rule. The figures of op_ranges joined to gpu_ops
-- and grouped by range, computed per link first and then over range_chains: time linear in the ops and the
-- chains, whatever the nesting depth.
CREATE OR REPLACE MACRO op_range_totals(attribution) AS TABLE
WITH own AS (  -- per link target (an innermost push/pop range, or a start/end range), rule and replay: its ops
  SELECT l.range_id, l.via, l.expand,
         CASE WHEN l.via = 'capture' THEN coalesce(o.correlation_id, -1 - o.op_id) END AS replay,
         count(*) AS ops, min(o.start_ns) AS first_ns, max(o.end_ns) AS last_ns, sum(o.duration_ns) AS total_ns
  FROM op_range_links l JOIN gpu_ops o USING (op_id)
  WHERE l.via = 'thread' OR attribution = 'process'
  GROUP BY ALL
), per AS (  -- per range and replay (NULL: the ops its launches gave it)
  SELECT range_id, replay, sum(ops) AS ops, min(first_ns) AS first_ns, max(last_ns) AS last_ns,
         sum(total_ns) AS total_ns
  FROM (
    SELECT c.range_id, w.replay, w.ops, w.first_ns, w.last_ns, w.total_ns
    FROM own w JOIN range_chains c ON c.inner_id = w.range_id
    WHERE w.expand AND (w.via = 'thread' OR NOT c.library)
    UNION ALL
    SELECT range_id, replay, ops, first_ns, last_ns, total_ns FROM own WHERE NOT expand)
  GROUP BY range_id, replay
)
SELECT range_id, sum(ops) AS ops, min(first_ns) AS first_ns, max(last_ns) AS last_ns, sum(total_ns) AS total_ns,
       sum(last_ns - first_ns) AS proj_ns,
       coalesce(sum(total_ns) FILTER (WHERE replay IS NOT NULL), 0) AS captured_ns
FROM per
GROUP BY range_id;
