-- @tables gpu_ops, nvtx_payload_fields, nvtx_payloads, op_launch, session_clock, strings

-- One row per NCCL call (an NVTX range of NCCL's domain) whose payload carries a message size: NCCL annotates
-- each call with its communicator, message size and reduction op or root (NCCL's src/collectives.cc, fields read
-- by the names its schema gives them). The communicator's rank count and this process's rank in it come from
-- the payload of the call that created it (`ncclCommInitRank*`, fields `No. of ranks`, `Rank`) in this export.
--
-- Its GPU kernels are those launched on the calling thread while the range was open (nsys's thread rule: the
-- launch call starts inside the range); its GPU time is from the first kernel's start to the last one's end.
-- A call made between ncclGroupStart and ncclGroupEnd launches its kernel at ncclGroupEnd, outside its own range:
-- it has no kernel here (kernels 0, no GPU time, no bandwidth), rather than a kernel guessed.
-- Bandwidths follow NCCL's PERFORMANCE notes (nccl-tests): algbw = S / t, busbw = algbw x factor, with the
-- factor 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for broadcast and reduce (n: the
-- communicator's ranks), and S the message size, except for all-gather and reduce-scatter, where NCCL's payload
-- holds the per-rank count and S is n times it (the gathered, or scattered, whole). Other calls (send, recv,
-- all-to-all, ...) get algbw only. bytes / ns = GB/s.
WITH calls AS (
  SELECT
    p.event_id, p.range_id, p.pid, p.tid, p.start_ns, p.end_ns, p.name,
    max(f.value) FILTER (WHERE f.field = 'NCCL communicator ID') AS comm,
    max(f.int_value) FILTER (WHERE f.field = 'Message size [bytes]') AS bytes,
    max(f.value) FILTER (WHERE f.field = 'Reduction operation') AS op,
    max(f.int_value) FILTER (WHERE f.field = 'Root') AS root,
    max(f.int_value) FILTER (WHERE f.field = 'No. of ranks') AS init_ranks,
    max(f.int_value) FILTER (WHERE f.field = 'Rank') AS init_rank
  FROM nvtx_payloads p
  JOIN nvtx_payload_fields f USING (event_id, payload)
  WHERE p.domain = 'NCCL' AND p.event = 'range'
  GROUP BY ALL
), comms AS (
  -- a communicator's size is the same in every process; a process's rank in it is known when all the calls
  -- that name one (init, finalize, destroy) name the same (several GPUs in one process: one rank per GPU)
  SELECT pid, comm, max(init_ranks) AS ranks,
         CASE WHEN min(init_rank) = max(init_rank) THEN min(init_rank) END AS rank
  FROM calls WHERE init_ranks IS NOT NULL
  GROUP BY pid, comm
), sized AS (
  SELECT c.*, z.ranks, m.rank, regexp_replace(c.name, '^nccl', '') AS kind
  FROM calls c
  LEFT JOIN comms m ON m.pid = c.pid AND m.comm = c.comm
  LEFT JOIN (SELECT comm, max(ranks) AS ranks FROM comms GROUP BY comm) z ON z.comm = c.comm
  WHERE c.bytes IS NOT NULL
), kern AS (
  SELECT s.event_id, count(*) AS kernels, min(g.start_ns) AS gpu_start_ns, max(g.end_ns) AS gpu_end_ns,
         sum(g.duration_ns)::BIGINT AS kernel_sum_ns, min(g.device_id) AS device_id,
         arg_min(n.value, g.start_ns) AS kernel
  FROM sized s
  JOIN (SELECT * FROM gpu_ops JOIN op_launch USING (op_id)) g
    ON g.kind = 'kernel' AND g.pid = s.pid AND g.api_tid = s.tid
    AND g.api_start_ns >= s.start_ns AND g.api_start_ns < s.end_ns
  LEFT JOIN strings n ON n.id = g.name_id
  GROUP BY s.event_id
), bw AS (
  SELECT s.*, k.kernels, k.kernel, k.device_id, k.gpu_start_ns, k.gpu_end_ns, k.kernel_sum_ns,
         k.gpu_end_ns - k.gpu_start_ns AS gpu_ns,
         CASE WHEN s.kind IN ('AllGather', 'ReduceScatter') THEN s.bytes * s.ranks ELSE s.bytes END AS data_bytes,
         CASE s.kind WHEN 'AllReduce' THEN 2.0 * (s.ranks - 1) / s.ranks
                     WHEN 'AllGather' THEN (s.ranks - 1) / s.ranks::DOUBLE
                     WHEN 'ReduceScatter' THEN (s.ranks - 1) / s.ranks::DOUBLE
                     WHEN 'Broadcast' THEN 1.0 WHEN 'Reduce' THEN 1.0 END AS busbw_factor
  FROM sized s LEFT JOIN kern k USING (event_id)
)
SELECT
  row_number() OVER (ORDER BY start_ns, pid, tid, event_id) - 1 AS call,
  kind, name, pid, tid, rank AS comm_rank, comm, ranks, bytes, data_bytes, op, root,
  start_ns, end_ns, end_ns - start_ns AS cpu_ns,
  coalesce(kernels, 0) AS kernels, kernel, device_id, gpu_start_ns, gpu_end_ns, gpu_ns, kernel_sum_ns,
  CASE WHEN gpu_ns > 0 THEN data_bytes / gpu_ns END AS algbw_gbps,
  busbw_factor,
  CASE WHEN gpu_ns > 0 THEN data_bytes / gpu_ns * busbw_factor END AS busbw_gbps,
  -- the first kernel's start on the UTC clock (session_clock), to compare ranks exported apart; NULL when the
  -- export does not say when its session started
  gpu_start_ns + (SELECT utc_epoch_ns FROM session_clock) AS gpu_start_utc_ns,
  range_id
FROM bw
ORDER BY call;
