-- @param $windows VARCHAR: name of the temp table of iteration windows (iteration_windows.sql, iterations.windows)

-- The iteration windows alone (rows of the table named $windows, made by iteration_windows.sql), in order:
-- what gaps need to be indexed by iteration. iterations.sql gives the same four columns and adds what the GPU did.
SELECT
  iteration,
  name,
  start_ns,
  end_ns,
  -- wall time of the iteration window
  (end_ns - start_ns)::BIGINT AS wall_ns
FROM query_table($windows)
ORDER BY iteration;
