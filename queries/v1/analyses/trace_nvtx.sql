-- @tables nvtx_ranges
-- @param $t0 BIGINT: start of the time window, ns
-- @param $t1 BIGINT: end of the time window, ns

-- NVTX ranges for the trace timeline: one row per nvtx_ranges row that overlaps [$t0, $t1] (ns), with its
-- domain and style (push/pop ranges nest per thread; start/end ranges may overlap), in start order.
SELECT
  r.range_id, r.pid, r.tid, r.start_ns, r.duration_ns, r.name, r.domain, r.style::VARCHAR AS style, r.depth
FROM nvtx_ranges r
WHERE r.start_ns <= $t1 AND r.end_ns >= $t0
ORDER BY r.pid, r.tid, r.start_ns, r.end_ns DESC, r.range_id;
