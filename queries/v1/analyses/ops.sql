-- @tables gpu_ops, nvtx_ranges, op_ranges, strings
-- @macros is_torch_backward_node, is_torch_op, torch_evaluated_node, torch_op_name, torch_op_seq, torch_op_sizes
-- @param $shapes BOOLEAN: one row per (name, sizes), not per name

-- PyTorch operators (ranges of torch.autograd.profiler.emit_nvtx; naming rules: the torch_* macros of
-- canonical/00_macros.sql): one row per operator name without its arguments, or per (name, sizes) when $shapes.
-- Every kernel launched inside an operator range or a backward node is counted once, on one row:
--   backward: the kernel's outermost backward range (an `autograd::engine::evaluate_function: X` range, seq of
--     its node X, or a node `XBackward0, seq = N`) has a seq, and an operator range of the same process with
--     that seq started before it (the latest such: the op that created the node); the kernel is the backward
--     GPU time of that op's outermost operator range.
--   forward: otherwise, the outermost operator range open on the launching thread (nsys's thread rule, no
--     process rule: another thread's operator did not launch it); for a kernel replayed from a CUDA graph node,
--     the outermost operator range open where its node was captured (the capture rule of op_ranges), before any
--     open at the replay: the operator that made the kernel.
-- Calls: an operator range inside a range of the same operator on its thread is a re-entry, not a call (see
-- user_calls), so aten::conv2d redispatched by autocast inside aten::conv2d is one call.
-- So an op nested in another (aten::addmm in aten::linear) has its calls and CPU time but no GPU time: it is
-- the outer op's, forward and backward alike. Ops that are called only inside others' backward (aten::mm in
-- AddmmBackward0) have calls and CPU time; their kernels are the forward op's backward time.
WITH op AS (  -- operator calls
  SELECT range_id, pid, tid, start_ns, end_ns, duration_ns, depth,
         torch_op_name(name) AS op, torch_op_seq(name) AS seq,
         CASE WHEN $shapes THEN torch_op_sizes(name) END AS sizes
  FROM nvtx_ranges
  WHERE style = 'PushPop' AND contains(name, '::') AND is_torch_op(name)
), top AS (  -- operator calls inside no other operator call on their thread (push/pop ranges nest properly:
             -- an earlier range either ended by this one's start or encloses it)
  SELECT range_id, pid, tid, start_ns FROM (
    SELECT range_id, pid, tid, start_ns,
           max(end_ns) OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, range_id
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
    FROM op
  ) WHERE before_end IS NULL OR before_end <= start_ns
), op_top AS (  -- each operator call with the outermost call around it (itself when outermost)
  SELECT o.range_id, t.range_id AS top_id
  FROM op o ASOF JOIN top t ON o.pid = t.pid AND o.tid = t.tid AND o.start_ns >= t.start_ns
), wrapper AS (  -- autograd's evaluate_function ranges, with the node they run
  SELECT range_id, torch_evaluated_node(name) AS node
  FROM nvtx_ranges WHERE style = 'PushPop' AND starts_with(name, 'autograd::engine::evaluate_function: ')
), node AS (  -- backward nodes: named so, or run by an evaluate_function range
  SELECT r.range_id, r.pid, r.parent_id, r.start_ns, r.depth, torch_op_seq(r.name) AS seq
  FROM nvtx_ranges r LEFT JOIN wrapper w ON w.range_id = r.parent_id
  WHERE r.style = 'PushPop' AND contains(r.name, ', seq = ')
    AND (is_torch_backward_node(r.name) OR (w.node = torch_op_name(r.name) AND NOT is_torch_op(r.name)))
), bwd AS (  -- backward ranges with their seq: the nodes, and the evaluate_function ranges around them
  SELECT range_id, pid, start_ns, depth, seq FROM node
  UNION ALL
  SELECT r.range_id, r.pid, r.start_ns, r.depth, any_value(n.seq)
  FROM node n JOIN wrapper w ON w.range_id = n.parent_id JOIN nvtx_ranges r ON r.range_id = w.range_id
  GROUP BY ALL
), creator AS (  -- each backward range with the operator call that created its node
  SELECT b.range_id AS bwd_id, c.range_id AS op_id
  FROM bwd b ASOF JOIN op c ON b.pid = c.pid AND b.seq = c.seq AND b.start_ns >= c.start_ns
), k AS (  -- kernels with the ranges they were launched in (thread rule) or captured in (capture rule)
  SELECT x.op_id AS kernel_id, x.range_id, x.via, g.duration_ns, g.name_id
  FROM op_ranges x JOIN gpu_ops g USING (op_id)
  WHERE x.via IN ('thread', 'capture') AND g.kind = 'kernel'
), k_bwd AS (  -- kernels in a backward range: the forward call whose backward they are (outermost range)
  SELECT k.kernel_id, t.top_id AS owner
  FROM k JOIN bwd b USING (range_id) JOIN creator c ON c.bwd_id = b.range_id JOIN op_top t ON t.range_id = c.op_id
  QUALIFY row_number() OVER (PARTITION BY k.kernel_id ORDER BY k.via = 'capture' DESC, b.depth, b.range_id) = 1
), k_fwd AS (  -- other kernels in an operator call: its outermost call
  SELECT k.kernel_id, o.range_id AS owner
  FROM k JOIN op o USING (range_id)
  WHERE k.kernel_id NOT IN (SELECT kernel_id FROM k_bwd)
  QUALIFY row_number() OVER (PARTITION BY k.kernel_id ORDER BY k.via = 'capture' DESC, o.depth, o.range_id) = 1
), owned AS (
  SELECT kernel_id, owner, false AS backward FROM k_fwd
  UNION ALL
  SELECT kernel_id, owner, true FROM k_bwd
), kern AS (  -- each owned kernel once, with its duration and name, keyed by its owner's (op, sizes)
  SELECT o.op, o.sizes, w.backward, g.duration_ns, g.name_id
  FROM owned w
  JOIN op o ON o.range_id = w.owner
  JOIN gpu_ops g ON g.op_id = w.kernel_id
), gpu AS (
  SELECT op, sizes,
         coalesce(sum(duration_ns) FILTER (WHERE NOT backward), 0)::BIGINT AS fwd_gpu_ns,
         coalesce(sum(duration_ns) FILTER (WHERE backward), 0)::BIGINT AS bwd_gpu_ns,
         count(*) AS kernels
  FROM kern GROUP BY ALL
), top_kernel AS (  -- the kernel name with the most time per (op, sizes), forward and backward together
  SELECT op, sizes, name_id FROM (SELECT op, sizes, name_id, sum(duration_ns) AS t FROM kern GROUP BY ALL)
  QUALIFY row_number() OVER (PARTITION BY op, sizes ORDER BY t DESC, name_id) = 1
), user_calls AS (  -- operator calls inside no call of the same operator on their thread: a call that re-enters
                   -- its own operator (autocast's redispatch of aten::conv2d inside aten::conv2d, aten::div's
                   -- Scalar overload calling its Tensor one) is part of the call that made it, once in calls and
                   -- once in cpu_ns. Push/pop ranges nest properly, so an earlier call of the operator that has not
                   -- ended when this one starts encloses it.
  SELECT op, sizes, duration_ns FROM (
    SELECT op, sizes, start_ns, duration_ns,
           max(end_ns) OVER (PARTITION BY pid, tid, op ORDER BY start_ns, end_ns DESC, range_id
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS same_before_end
    FROM op
  ) WHERE same_before_end IS NULL OR same_before_end <= start_ns
), calls AS (
  SELECT op, sizes, count(*) AS calls, sum(duration_ns)::BIGINT AS cpu_ns FROM user_calls GROUP BY ALL
)
SELECT
  c.op,
  c.sizes,
  -- calls of this operator: its ranges (calls nested in other operators and inside backward nodes included),
  -- less those inside a call of the same operator on their thread (user_calls: a re-entry is not a call)
  c.calls,
  -- their CPU (wall) time, summed: a call nested in another operator counts in its own row and in the outer
  -- one's; a re-entry of the same operator counts once, in the call around it
  c.cpu_ns,
  -- kernels launched inside the outermost calls of this op, outside any backward node of a known forward op
  coalesce(g.fwd_gpu_ns, 0) AS fwd_gpu_ns,
  -- kernels launched inside the backward nodes created by these calls (or by operators nested in them)
  coalesce(g.bwd_gpu_ns, 0) AS bwd_gpu_ns,
  -- kernels counted in fwd_gpu_ns and bwd_gpu_ns
  coalesce(g.kernels, 0) AS kernels,
  -- the kernel (demangled name) with the most of that time
  s.value AS top_kernel
FROM calls c
LEFT JOIN gpu g ON g.op = c.op AND g.sizes IS NOT DISTINCT FROM c.sizes
LEFT JOIN top_kernel t ON t.op = c.op AND t.sizes IS NOT DISTINCT FROM c.sizes
LEFT JOIN strings s ON s.id = t.name_id
ORDER BY fwd_gpu_ns + bwd_gpu_ns DESC, c.cpu_ns DESC, c.op, c.sizes;
