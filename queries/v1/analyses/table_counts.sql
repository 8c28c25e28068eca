-- @tables api_calls, devices, gpu_metric_counts, gpu_ops, graph_nodes, nvtx_marks, nvtx_payloads, nvtx_ranges
-- @tables os_calls, processes
-- @tables threads

-- Row counts of the canonical tables, by what they hold.
SELECT 'kernels' AS what, count(*) AS rows FROM gpu_ops WHERE kind = 'kernel'
UNION ALL SELECT 'memcpy', count(*) FROM gpu_ops WHERE kind = 'memcpy'
UNION ALL SELECT 'memset', count(*) FROM gpu_ops WHERE kind = 'memset'
UNION ALL SELECT 'graph launches', count(*) FROM gpu_ops WHERE kind = 'graph'
UNION ALL SELECT 'graph node ops', count(*) FROM gpu_ops WHERE graph_node_id IS NOT NULL
-- the graph node ops whose node the export traces back to its creation (the capture rule of op_ranges)
UNION ALL SELECT 'graph node ops traced to their capture', count(*)
  FROM gpu_ops o SEMI JOIN graph_nodes g
    ON g.pid = o.pid AND g.graph_node_id = o.graph_node_id AND g.original_id IS NOT NULL AND g.created_ns IS NOT NULL
UNION ALL SELECT 'CUDA API calls', count(*) FROM api_calls
UNION ALL SELECT 'NVTX ranges', count(*) FROM nvtx_ranges
UNION ALL SELECT 'NVTX marks', count(*) FROM nvtx_marks
UNION ALL SELECT 'OS runtime calls', count(*) FROM os_calls
UNION ALL SELECT 'processes', count(*) FROM processes
-- of them, those whose GPU work the export holds (an export of a whole job holds one per rank; `processes` also
-- counts every process nsys listed on the machine)
UNION ALL SELECT 'processes with GPU work', count(DISTINCT pid) FROM gpu_ops
UNION ALL SELECT 'threads', count(*) FROM threads
UNION ALL SELECT 'GPUs', count(*) FROM devices
-- counted as the export was read (48_gpu_metric_counts.sql): the samples themselves are not built for this
UNION ALL SELECT 'GPU metrics samples', coalesce(sum(samples), 0)::BIGINT FROM gpu_metric_counts
UNION ALL SELECT 'NVTX events with payloads', count(DISTINCT event_id) FROM nvtx_payloads
UNION ALL SELECT 'NCCL ranges', count(*) FROM nvtx_ranges WHERE domain = 'NCCL'
UNION ALL SELECT 'NCCL ranges with payloads', count(DISTINCT event_id) FROM nvtx_payloads WHERE domain = 'NCCL' AND event = 'range';
