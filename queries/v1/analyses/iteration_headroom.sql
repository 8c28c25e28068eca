-- @tables kernel_classes, kernel_tensor_use
-- @macros kernel_tensor_cores
-- @param $matrix VARCHAR[]: the kernel categories that multiply matrices
-- @param $placed VARCHAR: name of the table of the process's ops with their iteration (placed_ops.sql, scratch.py)

-- Per iteration (of the windows placed_ops.sql placed the ops in: $placed): the GPU work two findings'
-- headroom rests on (nsysql/analyses/headroom.py), launched in the iteration as iterations.sql counts it (by any
-- thread of process $pid, at the launching call's start, else the op's own). Iterations without such work have
-- no row (0 ns).
WITH simt AS (  -- matrix kernels on CUDA cores: the rows the finding `matrix math without tensor cores` counts
                -- (kernels_by_category.sql: measured by GPU metrics where they judge, else by name)
  SELECT c.name_id
  FROM kernel_classes c
  LEFT JOIN kernel_tensor_use u ON u.name_id = c.name_id
  WHERE list_contains($matrix, c.category) AND kernel_tensor_cores(u.measured, c.tensor_cores) = 'no'
), ops AS (
  SELECT iteration, kind, end_ns - start_ns AS duration_ns, bytes FROM query_table($placed)
  WHERE (kind = 'kernel' AND name_id IN (SELECT name_id FROM simt))
     OR (kind = 'memcpy' AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable')
)
SELECT
  iteration,
  -- GPU time of the matrix kernels (category in $matrix) that ran on CUDA cores
  coalesce(sum(duration_ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS simt_matrix_ns,
  -- host-to-device copies from pageable memory: their GPU time and bytes
  coalesce(sum(duration_ns) FILTER (WHERE kind = 'memcpy'), 0)::BIGINT AS pageable_ns,
  coalesce(sum(bytes) FILTER (WHERE kind = 'memcpy'), 0)::BIGINT AS pageable_bytes
FROM ops
GROUP BY iteration
ORDER BY iteration;
