-- @tables gpu_ops

-- CUDA graph launches traced whole (nsys --cuda-graph-trace=graph, its default: gpu_ops.kind = 'graph'): nsys
-- records each launch as one span on the GPU and none of the kernels it runs, so the kernel tables (as
-- `nsys stats -r cuda_gpu_kern_sum` and `nvtx_kern_sum`) leave their GPU time out. One row: how many launches
-- (0 where there are none) and their GPU time (total_ns), and beside them the kernels' own GPU time (kernel_ns).
SELECT count(*) FILTER (WHERE kind = 'graph') AS launches,
       coalesce(sum(duration_ns) FILTER (WHERE kind = 'graph'), 0)::BIGINT AS total_ns,
       coalesce(sum(duration_ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_ns
FROM gpu_ops;
