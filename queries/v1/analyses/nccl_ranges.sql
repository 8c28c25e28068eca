-- @tables nvtx_ranges

-- NVTX ranges of NCCL's own domain (`NCCL:ncclAllReduce`, ...): instances and CPU-side time per name.
SELECT name, count(*) AS instances, sum(duration_ns)::BIGINT AS total_ns
FROM nvtx_ranges WHERE domain = 'NCCL'
GROUP BY name ORDER BY total_ns DESC;
