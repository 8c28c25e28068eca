-- @param $table VARCHAR: a canonical table's name
-- @tables

-- How many rows the canonical table $table holds (`info` asks it of each table a declared analysis requires,
-- Analysis.requires in nsysql.engine.declare: an empty one means the analysis has nothing to answer from).
SELECT count(*) AS "rows" FROM query_table($table);
