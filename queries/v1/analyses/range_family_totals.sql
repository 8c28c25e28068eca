-- Time in NVTX ranges per numbered family (`Batch0`, `Batch1` ... are one family `Batch`: see family_name).
SELECT family_name(name) AS name, sum(duration_ns)::BIGINT AS total_ns FROM nvtx_ranges GROUP BY 1;
