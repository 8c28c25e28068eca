-- @tables devices, gpu_busy, gpu_ops, profile_facts

-- Per GPU: active span (first op start to last op end), busy time (union of ops on all streams), busy %
-- of that active span and of the whole profile span, and time per op kind.
WITH busy AS (
  SELECT device_id, sum(end_ns - start_ns)::BIGINT AS busy_ns, min(start_ns) AS first_ns, max(end_ns) AS last_ns
  FROM gpu_busy GROUP BY device_id
), kinds AS (
  SELECT device_id,
         (sum(duration_ns) FILTER (WHERE kind = 'kernel'))::BIGINT AS kernel_ns,
         (sum(duration_ns) FILTER (WHERE kind = 'memcpy'))::BIGINT AS memcpy_ns,
         (sum(duration_ns) FILTER (WHERE kind = 'memset'))::BIGINT AS memset_ns,
         (sum(duration_ns) FILTER (WHERE kind = 'graph'))::BIGINT AS graph_ns,
         count(*) AS ops
  FROM gpu_ops GROUP BY device_id
), span AS (
  SELECT max(CASE WHEN key = 'span_ns' THEN value::BIGINT END) AS span_ns FROM profile_facts
)
SELECT
  b.device_id,
  d.name AS device,
  k.ops,
  b.last_ns - b.first_ns AS active_ns,
  b.busy_ns,
  -- busy_ns as % of active_ns (first op to last op on this device)
  100.0 * b.busy_ns / nullif(b.last_ns - b.first_ns, 0) AS busy_pct_active,
  -- busy_ns as % of the profile's whole span
  100.0 * b.busy_ns / nullif(span.span_ns, 0) AS busy_pct_span,
  coalesce(k.kernel_ns, 0) AS kernel_ns,
  coalesce(k.memcpy_ns, 0) AS memcpy_ns,
  coalesce(k.memset_ns, 0) AS memset_ns,
  coalesce(k.graph_ns, 0) AS graph_ns
FROM busy b
JOIN kinds k USING (device_id)
LEFT JOIN devices d USING (device_id)
CROSS JOIN span
ORDER BY b.device_id;
