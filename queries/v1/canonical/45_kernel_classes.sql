-- @include 05_strings.sql, 20_devices.sql, 44_kernel_rules.sql
-- @staging raw_kernel
-- @tables devices, kernel_rules, strings
-- @defines kernel_classes
-- @empty_without raw_kernel

-- nsysql canonical schema v1: what each kernel name does, by the rules of kernel_rules (44_kernel_rules.sql).

-- One row per kernel name of the export (gpu_ops.name_id of kind `kernel`, the demangled name): the first rule
-- by priority whose pattern matches the lowercased name; `other` / `unknown` when none does. Matched
-- once per distinct name (a few hundred), never per kernel launch. Read from the staging table, as gpu_busy
-- is, so that it need not wait for gpu_ops (the same ids: gpu_ops.name_id is the kernel's demangledName).
-- Each kernel name with the devices it ran on folded in: its lowercased name (the rules' patterns are lowercase,
-- not compiled with the 'i' flag, which RE2 compiles at about twice the cost) and whether no device it ran on has
-- tensor cores.
CREATE OR REPLACE TEMP TABLE _kernel_names AS
WITH ran AS (  -- each name with the devices it ran on
  SELECT DISTINCT demangledName AS name_id, deviceId AS device_id FROM raw_kernel
)
SELECT r.name_id, lower(any_value(s.value)) AS lname,
       -- every device it ran on says its compute capability, each below 7.0 (Volta): no tensor cores to run
       -- on, whatever the name says; unknown where any device's is unknown
       bool_and(coalesce(try_cast(split_part(d.compute_capability, '.', 1) AS INTEGER) < 7, false)) AS no_cores
FROM ran r
LEFT JOIN strings s ON s.id = r.name_id  -- a name missing from StringIds matches no rule: other
LEFT JOIN devices d ON d.device_id IS NOT DISTINCT FROM r.device_id
GROUP BY r.name_id;

-- The first rule by priority whose pattern matches each name, as one CASE of every rule in priority order, each
-- pattern a constant of the query: DuckDB compiles a constant pattern once, and a pattern read from a table
-- again for every (name, rule) pair it tries (a few hundred names x every rule: most of this file's time). The
-- query is written here from kernel_rules, each pattern quoted as an SQL string, and run by query().
SET VARIABLE nsysql_kernel_rule_query = (
  SELECT 'SELECT name_id, CASE '
         || string_agg('WHEN regexp_matches(lname, ''' || replace(pattern, '''', '''''') || ''') THEN ' || priority,
                       ' ' ORDER BY priority)
         || ' END AS rule FROM _kernel_names'
  FROM kernel_rules
);

CREATE OR REPLACE TABLE kernel_classes AS
SELECT
  -- strings.id of the kernel's demangled name (gpu_ops.name_id)
  n.name_id,
  -- gemm, conv, attention, norm, softmax, elementwise, reduction, optimizer, copy, communication, sort_scan
  -- or other
  coalesce(r.category, 'other') AS category,
  -- yes, no or unknown: whether the kernel runs on tensor cores, as far as its name says; `no` whatever the name
  -- where every GPU it ran on has none (compute capability below 7.0, as devices gives it)
  CASE WHEN n.no_cores THEN 'no' ELSE coalesce(r.tensor_cores, 'unknown') END AS tensor_cores,
  -- kernel_rules.priority of the rule that decided, NULL when none matched
  r.priority AS rule
FROM _kernel_names n
JOIN query(getvariable('nsysql_kernel_rule_query')) m USING (name_id)
LEFT JOIN kernel_rules r ON r.priority = m.rule;
