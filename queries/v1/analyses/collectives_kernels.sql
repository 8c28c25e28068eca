-- @tables gpu_ops, nvtx_ranges, strings

-- NCCL collectives told by their kernels' names alone, for a profile whose NCCL ranges carry no message size
-- (no NVTX payloads): per kind, the NCCL kernels that ran and their GPU time (the sum of the kernels'
-- durations), and the calls NCCL's NVTX ranges name (NULL where the profile has no range of NCCL's domain).
-- An NCCL kernel is a kernel whose name holds `nccl` (as collectives_missing.sql counts them); its kind is the
-- collective its name starts with, whatever the NCCL version's spelling: `ncclDevKernel_AllReduce_Sum_f32_RING_LL`
-- (2.19 and later), `ncclKernel_AllReduce_RING_LL_Sum_float`, `ncclAllReduceRingLLKernel_sum_f32` (older);
-- `other` where none of the kinds below is named. A range's kind is its name without `nccl` (ncclAllReduce).
WITH k AS (
  SELECT o.duration_ns,
         coalesce(nullif(regexp_extract(s.value,
           'nccl(?:Dev)?(?:Kernel_)?(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll)',
           1), ''), 'other') AS kind
  FROM gpu_ops o JOIN strings s ON s.id = o.name_id
  WHERE o.kind = 'kernel' AND contains(lower(s.value), 'nccl')
), r AS (
  SELECT regexp_replace(name, '^nccl', '') AS kind, count(*) AS calls
  FROM nvtx_ranges WHERE domain = 'NCCL'
  GROUP BY ALL
)
SELECT k.kind,
       -- NCCL's NVTX ranges of this kind (its calls); NULL where the profile has no NCCL range
       CASE WHEN (SELECT count(*) FROM r) > 0 THEN coalesce(any_value(r.calls), 0) END AS calls,
       count(*) AS kernels,
       sum(k.duration_ns)::BIGINT AS gpu_ns,
       median(k.duration_ns)::BIGINT AS med_gpu_ns
FROM k LEFT JOIN r USING (kind)
GROUP BY k.kind
ORDER BY gpu_ns DESC, k.kind;
