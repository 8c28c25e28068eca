-- @tables nvtx_ranges
-- @macros range_family

-- Time in NVTX ranges per family (`Batch0`, `Batch1` ... are one family `Batch`, the calls of a PyTorch operator
-- are their operator: see range_family).
SELECT range_family(name) AS name, sum(duration_ns)::BIGINT AS total_ns FROM nvtx_ranges GROUP BY 1;
