-- @param $placed VARCHAR: name of the table of the process's ops with their iteration (placed_ops.sql, scratch.py)

-- The GPU ops launched in the iterations, per kind (kernel, memcpy, memset, graph): how many and their GPU time.
-- What a per-iteration kernel answer with no row says instead: a loop whose GPU work is all CUDA graphs traced
-- whole (`graph`, nsys --cuda-graph-trace=graph) has kernels that nsys did not record one by one.
SELECT kind, count(*) AS count, sum(end_ns - start_ns)::BIGINT AS total_ns
FROM query_table($placed)
GROUP BY kind
ORDER BY kind;
