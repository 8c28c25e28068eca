-- @tables data_quality

-- The export's flawed rows as the load counted them (queries/v1/canonical/95_data_quality.sql).
SELECT source, canonical, problem, "rows", effect FROM data_quality;
