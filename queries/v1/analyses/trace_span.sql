-- @tables profile_facts

-- The profile's span (ns on the export's clock): where `nsysql trace --window` counts its times from.
SELECT
  max(CASE WHEN key = 'span_start_ns' THEN value END)::BIGINT AS start_ns,
  max(CASE WHEN key = 'span_end_ns' THEN value END)::BIGINT AS end_ns
FROM profile_facts;
