-- @tables nvtx_ranges
-- @macros memory_held
-- @param $names VARCHAR[]: the range names --range selects; NULL: every range

-- GPU memory per NVTX range (domain, name) and device, over the instances of ranges whose process allocated GPU
-- memory: the highest peak any instance reached (memory_held, canonical/47_gpu_memory.sql), and the growth per
-- instance (held at its end minus at its start): its mean, and its sum over the instances. A range whose
-- instances each grow is where memory is kept. With $names, only the ranges of those names.
SELECT
  r.domain, r.name, m.device_id,
  count(*) AS instances,
  max(m.peak_bytes) AS peak_bytes,
  avg(m.end_bytes - m.start_bytes) AS growth_mean_bytes,
  sum(m.end_bytes - m.start_bytes)::BIGINT AS growth_total_bytes
FROM nvtx_ranges r
JOIN memory_held('nvtx_ranges') m ON m.pid = r.pid AND m.start_ns = r.start_ns AND m.end_ns = r.end_ns
WHERE $names IS NULL OR list_contains($names, r.name)
GROUP BY ALL
ORDER BY peak_bytes DESC, growth_total_bytes DESC, r.domain, r.name, m.device_id;
