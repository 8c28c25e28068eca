-- @tables nvtx_payloads
-- @param $domain VARCHAR: the NVTX domain, e.g. `Python Periodic Sampling`
-- @param $event VARCHAR: 'range' or 'mark'

-- The events of one domain and kind that carry payloads: how many, how many have a payload that decodes, and how
-- many a payload header that promises more records than their bytes hold (no payload read: payload NULL).
SELECT
  count(DISTINCT event_id) AS events,
  count(DISTINCT event_id) FILTER (decoded) AS decoded,
  count(DISTINCT event_id) FILTER (payload IS NULL) AS damaged
FROM nvtx_payloads
WHERE domain = $domain AND event = $event;
