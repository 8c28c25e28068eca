-- @tables nvtx_ranges
-- @param $names VARCHAR[]: the range names

-- Summed wall time of the instances of the named ranges, ns.
SELECT sum(duration_ns)::BIGINT AS ns FROM nvtx_ranges WHERE list_contains($names, name);
