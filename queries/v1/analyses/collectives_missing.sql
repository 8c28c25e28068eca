-- @tables gpu_ops, nvtx_payloads, nvtx_ranges, profile_facts, strings

-- What `collectives` needs and the profile may lack: its NCCL ranges, those with payloads, and the loader's
-- `missing` facts (one of which says when the export left the payload bytes out); and the NCCL kernels that
-- ran, with their GPU time, whether or not ranges name their calls (NCCL writes no range without NVTX tracing);
-- and the GPU ops of any kind (none: the export recorded no GPU activity, so no NCCL kernel says nothing of NCCL);
-- and, of the NCCL ranges with payloads, those with a payload decoded, and those whose payload header promises
-- more records than their bytes hold (no payload read: nvtx_payloads.payload NULL).
SELECT
  (SELECT count(*) FROM nvtx_ranges WHERE domain = 'NCCL') AS nccl_ranges,
  (SELECT count(DISTINCT event_id) FROM nvtx_payloads WHERE domain = 'NCCL' AND event = 'range') AS nccl_payloads,
  (SELECT coalesce(list(value), []) FROM profile_facts WHERE key = 'missing') AS missing,
  (SELECT count(*) FROM gpu_ops o JOIN strings s ON s.id = o.name_id
   WHERE o.kind = 'kernel' AND contains(lower(s.value), 'nccl')) AS nccl_kernels,
  (SELECT coalesce(sum(o.duration_ns), 0) FROM gpu_ops o JOIN strings s ON s.id = o.name_id
   WHERE o.kind = 'kernel' AND contains(lower(s.value), 'nccl'))::BIGINT AS nccl_kernel_ns,
  (SELECT count(*) FROM gpu_ops) AS gpu_ops,
  (SELECT count(DISTINCT event_id) FILTER (decoded) FROM nvtx_payloads
   WHERE domain = 'NCCL' AND event = 'range') AS nccl_decoded,
  (SELECT count(DISTINCT event_id) FILTER (payload IS NULL) FROM nvtx_payloads
   WHERE domain = 'NCCL' AND event = 'range') AS nccl_damaged;
