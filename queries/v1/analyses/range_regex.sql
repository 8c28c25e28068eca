-- @tables nvtx_ranges
-- @param $pattern VARCHAR: an RE2 regular expression

-- NVTX range names a user's --range regex finds (anywhere in the name). DuckDB's regexp is RE2: linear time in
-- the name's length whatever the pattern, so a pattern like `(a+)+$` cannot backtrack for minutes.
SELECT name FROM nvtx_ranges GROUP BY name HAVING regexp_matches(name, $pattern) ORDER BY name;
