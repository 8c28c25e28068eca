-- Per iteration (rows of the table named $windows, made by iteration_windows.sql): the GPU work two findings'
-- headroom rests on (nsysql/analyses/headroom.py), launched in the iteration as iterations.sql counts it (by any
-- thread of process $pid, at the launching call's start, else the op's own). Iterations without such work have
-- no row (0 ns).
WITH simt AS (  -- matrix kernels on CUDA cores: the rows the finding `matrix math without tensor cores` counts
                -- (kernels_by_category.sql: measured by GPU metrics where they judge, else by name)
  SELECT c.name_id
  FROM kernel_classes c
  LEFT JOIN kernel_tensor_use u ON u.name_id = c.name_id
  WHERE list_contains($matrix, c.category) AND coalesce(u.measured, c.tensor_cores) = 'no'
), ops AS (
  SELECT i.iteration, o.kind, o.duration_ns, o.bytes
  FROM (SELECT *, coalesce(api_start_ns, start_ns) AS t
        FROM gpu_ops
        WHERE pid = $pid
          AND ((kind = 'kernel' AND name_id IN (SELECT name_id FROM simt))
               OR (kind = 'memcpy' AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable'))) o
  ASOF JOIN query_table($windows) i ON o.t >= i.start_ns
  WHERE o.t < i.end_ns
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
