-- @tables data_quality
-- @param $canonical VARCHAR: a canonical table's name (data_quality.canonical)

-- How many of the export's rows for the canonical table $canonical the load left out as flawed (data_quality's
-- rows whose effect is `dropped`: no interval, or no row of its own, such as a CUDA backtrace): where that table
-- is empty, these say it was recorded, not that nothing was.
SELECT coalesce(sum("rows"), 0)::BIGINT AS "rows"
FROM data_quality
WHERE canonical = $canonical AND starts_with(effect, 'dropped');
