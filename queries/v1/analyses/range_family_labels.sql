-- @tables nvtx_ranges
-- @macros range_family_label

-- The families of NVTX range names, as shown (`Batch*`, `aten::addmm`; see range_family_label), for saying what
-- ranges there are.
SELECT DISTINCT range_family_label(name) AS label FROM nvtx_ranges ORDER BY label;
