-- @tables nvtx_ranges
-- @macros in_family
-- @param $stem VARCHAR: the family asked for (`Batch` selects `Batch0`, `Batch_1`, ...)

-- NVTX range names of the numbered family `$stem` (`Batch` selects `Batch0`, `Batch_1`, ...: see in_family).
SELECT DISTINCT name FROM nvtx_ranges WHERE in_family(name, $stem) ORDER BY name;
