-- @tables gpu_ops, strings

-- Memory operations: per kind (memcpy direction and memory kinds, memset) count, bytes and GPU time.
SELECT
  s.value AS operation,
  coalesce(src_kind, '') AS src_kind,
  coalesce(dst_kind, '') AS dst_kind,
  count(*) AS count,
  sum(bytes)::BIGINT AS bytes,
  sum(duration_ns)::BIGINT AS total_ns,
  avg(duration_ns) AS avg_ns
FROM gpu_ops o
LEFT JOIN strings s ON s.id = o.name_id
WHERE kind IN ('memcpy', 'memset')
GROUP BY ALL
ORDER BY total_ns DESC;
