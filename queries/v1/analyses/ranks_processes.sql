-- @tables process_roles, threads

-- Per process with GPU work, busiest first: its main device and the MPI rank its threads name, where they do.
-- nsys's MPI trace (-t mpi) names each rank's thread `MPI Rank N` (N: the rank in MPI_COMM_WORLD), so one
-- export of a whole `mpirun` job says which process is which rank; `mpi_rank` is NULL where no thread of the
-- process is so named, or where its threads name more than one rank (then the name says nothing). A rank is a C
-- int of MPI (0 .. 2^31-1): a name with a larger number names no rank, whatever its size. GPU ops whose
-- process the export does not name (a GPU table without globalPid: process_roles' NULL pid) are no process.
SELECT p.pid, p.device_id, p.ops,
       CASE WHEN count(DISTINCT r.n) = 1 THEN min(r.n) END AS mpi_rank
FROM process_roles p
LEFT JOIN (
  SELECT pid, TRY_CAST(regexp_extract(name, '^MPI Rank ([0-9]+)$', 1) AS INTEGER)::BIGINT AS n
  FROM threads WHERE regexp_matches(name, '^MPI Rank [0-9]+$')
) r ON r.pid = p.pid
WHERE p.pid IS NOT NULL
GROUP BY p.pid, p.device_id, p.ops
ORDER BY p.ops DESC, p.pid;
