-- The families of NVTX range names, as shown (`Batch*`; see family_label), for saying what ranges there are.
SELECT DISTINCT family_label(name) AS label FROM nvtx_ranges ORDER BY label;
