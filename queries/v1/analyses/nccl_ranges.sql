-- @tables nvtx_ranges

-- NVTX ranges of NCCL's own domain (`NCCL:ncclAllReduce`, ...): one row per range, when it started and its
-- CPU-side time (nsysql.analyses.ranks counts them per iteration of the loop).
SELECT name, start_ns, duration_ns
FROM nvtx_ranges WHERE domain = 'NCCL'
ORDER BY start_ns;
