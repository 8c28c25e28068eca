-- @tables nvtx_ranges

-- Distinct NVTX range names with their instance counts, for resolving a --range pattern.
SELECT name, count(*) AS count FROM nvtx_ranges GROUP BY name ORDER BY name;
