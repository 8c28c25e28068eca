-- @include 25_calls.sql, 40_gpu_ops.sql
-- @tables _calls, _launch_calls, _shared_calls, _shared_ids, gpu_ops
-- @defines op_launch
-- @empty_without _calls, gpu_ops

-- nsysql canonical schema v1: which CUDA API call launched each GPU op. Apart from gpu_ops (40_gpu_ops.sql), so
-- that a question that reads no launch (`kernels`, `memcpy`) neither reads the calls nor matches them: op_launch
-- is built where a question reads it (the launch figures, iterations, NVTX attribution, the trace).

-- Which call launched each op, matched on (process, correlation id), by the rule of 25_calls.sql: an op takes the
-- call of its id, or, where several calls of its process share the id (_shared_ids), one of them (_shared_calls).

-- op_id -> call_id for the ops whose (pid, correlation_id) is shared, by that rule
CREATE OR REPLACE TEMP TABLE _shared_launch AS
WITH first AS (  -- the earliest candidate per (pid, correlation_id)
  SELECT pid, correlation_id, arg_min(call_id, (start_ns, call_id)) AS call_id FROM _shared_calls GROUP BY ALL
), linked AS (
  SELECT o.op_id, s.pid, s.correlation_id, o.start_ns AS start
  FROM gpu_ops o JOIN _shared_ids s ON s.pid = o.pid AND s.correlation_id = o.correlation_id
)
SELECT o.op_id, coalesce(c.call_id, f.call_id) AS call_id
FROM linked o
ASOF LEFT JOIN _shared_calls c ON c.pid = o.pid AND c.correlation_id = o.correlation_id AND o.start >= c.start_ns
LEFT JOIN first f ON c.call_id IS NULL AND f.pid = o.pid AND f.correlation_id = o.correlation_id;

-- The ops whose id no other call of their process shares meet the calls in one hash join on (pid,
-- correlation_id): the ops' keys make its hash table and the calls (18M rows at 10M kernels) stream past it, one
-- narrow row per op held, never one per call nor every op column (_launch_calls, 25_calls.sql, says why the calls
-- are read there); at most one call has such an op's key. The ops
-- of shared ids (none, as a rule) take the call _shared_launch chose, by its call_id. Two joins, not one on a
-- third key column that marked each call as shared or not: that took a join of every call with _shared_ids.

-- One row per GPU op whose launching call was traced: the call's thread, start, end and name. gpu_ops LEFT JOIN
-- op_launch USING (op_id) gives every op with its call (NULL where none was traced); the view gpu_ops_named has
-- every column of both, with the names spelled out.
CREATE OR REPLACE TABLE op_launch AS
SELECT
  -- gpu_ops.op_id of the op
  o.op_id,
  -- process of the launching call, the op's own (gpu_ops.pid): who launched what is read here without gpu_ops
  o.pid AS api_pid,
  -- api_calls.call_id of the call that launched it, matched on (pid, correlation_id)
  a.call_id AS api_call_id,
  -- thread that launched it
  a.tid AS api_tid,
  -- launch call start, ns
  a.start_ns AS api_start_ns,
  -- launch call end, ns
  a.end_ns AS api_end_ns,
  -- strings.id of the launch call's name, e.g. `cudaLaunchKernel_v7000`, `cudaGraphLaunch_v10000`
  a.name_id AS api_name_id
FROM _launch_calls a
JOIN (SELECT op_id, pid, correlation_id FROM gpu_ops ANTI JOIN _shared_ids USING (pid, correlation_id)) o
  ON a.pid = o.pid AND a.correlation_id = o.correlation_id
UNION ALL
-- the ops of shared ids: the one call each that _shared_launch chose (of the op's own process and id), so that
-- an id shared by many calls (a broken or hostile export) costs no more than unique ones
SELECT l.op_id, a.pid, a.call_id, a.tid, a.start_ns, a.end_ns, a.name_id
FROM _shared_launch l JOIN _calls a ON a.call_id = l.call_id;
