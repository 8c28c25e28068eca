-- @tables gpu_ops, op_launch, strings
-- @param $t0 BIGINT: start of the time window, ns
-- @param $t1 BIGINT: end of the time window, ns

-- GPU work for the trace timeline: one row per gpu_ops row that overlaps [$t0, $t1] (ns; an op counts when
-- start_ns <= $t1 and end_ns >= $t0), on its device and stream, in start order (longer first at one instant, so
-- that enclosing slices come before enclosed ones).
SELECT
  o.device_id, o.stream_id, o.pid, o.kind::VARCHAR AS kind, o.start_ns, o.duration_ns,
  coalesce(n.value, '(no name)') AS name, o.correlation_id, o.bytes, o.graph_node_id,
  an.value AS api_name
FROM gpu_ops o
LEFT JOIN strings n ON n.id = o.name_id
LEFT JOIN op_launch l ON l.op_id = o.op_id
LEFT JOIN strings an ON an.id = l.api_name_id
WHERE o.start_ns <= $t1 AND o.end_ns >= $t0
ORDER BY o.device_id, o.stream_id, o.start_ns, o.end_ns DESC, o.op_id;
