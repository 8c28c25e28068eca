-- GPU ops launched inside the ranges of each given name on one thread: the tie-break between range families
-- that repeat at the same depth (the iteration is the one that encloses GPU work, not an MPI_Send beside it).
-- $pid, $tid: the thread; $names: the range names of the tied families.
SELECT
  -- nvtx_ranges.name
  r.name,
  -- (op, range) pairs: GPU ops inside ranges of this name
  count(*) AS ops
FROM nvtx_ranges r
JOIN op_ranges o USING (range_id)
WHERE r.pid = $pid AND r.tid = $tid AND list_contains($names, r.name)
GROUP BY r.name;
