-- @tables nvtx_payloads, nvtx_ranges, profile_facts

-- What `collectives` needs and the profile may lack: its NCCL ranges, those with payloads, and the loader's
-- `missing` facts (one of which says when the export left the payload bytes out).
SELECT
  (SELECT count(*) FROM nvtx_ranges WHERE domain = 'NCCL') AS nccl_ranges,
  (SELECT count(DISTINCT event_id) FROM nvtx_payloads WHERE domain = 'NCCL' AND event = 'range') AS nccl_payloads,
  (SELECT coalesce(list(value), []) FROM profile_facts WHERE key = 'missing') AS missing;
