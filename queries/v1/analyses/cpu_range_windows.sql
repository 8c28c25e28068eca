-- @tables nvtx_ranges
-- @param $names VARCHAR[]: the range names selected (patterns.resolve_range)

-- The instances of the named NVTX ranges, as time windows.
SELECT start_ns, end_ns FROM nvtx_ranges WHERE name IN (SELECT unnest($names)) ORDER BY start_ns;
