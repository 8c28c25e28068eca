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
CREATE OR REPLACE TABLE kernel_classes AS
WITH ran AS (  -- each name with the devices it ran on
  SELECT DISTINCT demangledName AS name_id, deviceId AS device_id FROM raw_kernel
), names AS (
  SELECT r.name_id, any_value(s.value) AS name,
         -- every device it ran on says its compute capability, each below 7.0 (Volta): no tensor cores to run
         -- on, whatever the name says; unknown where any device's is unknown
         bool_and(coalesce(try_cast(split_part(d.compute_capability, '.', 1) AS INTEGER) < 7, false)) AS no_cores
  FROM ran r
  LEFT JOIN strings s ON s.id = r.name_id  -- a name missing from StringIds matches no rule: other
  LEFT JOIN devices d ON d.device_id IS NOT DISTINCT FROM r.device_id
  GROUP BY r.name_id
), matched AS (
  SELECT n.name_id, r.priority, r.category, r.tensor_cores
  FROM names n
  -- the name lowercased, not the 'i' flag: a pattern read from a table is compiled again for every row, and
  -- RE2 compiles a case-insensitive pattern at about twice the cost
  JOIN kernel_rules r ON regexp_matches(lower(n.name), r.pattern)
  QUALIFY row_number() OVER (PARTITION BY n.name_id ORDER BY r.priority) = 1
)
SELECT
  -- strings.id of the kernel's demangled name (gpu_ops.name_id)
  n.name_id,
  -- gemm, conv, attention, norm, softmax, elementwise, reduction, optimizer, copy, communication, sort_scan
  -- or other
  coalesce(m.category, 'other') AS category,
  -- yes, no or unknown: whether the kernel runs on tensor cores, as far as its name says; `no` whatever the name
  -- where every GPU it ran on has none (compute capability below 7.0, as devices gives it)
  CASE WHEN n.no_cores THEN 'no' ELSE coalesce(m.tensor_cores, 'unknown') END AS tensor_cores,
  -- kernel_rules.priority of the rule that decided, NULL when none matched
  m.priority AS rule
FROM names n
LEFT JOIN matched m USING (name_id);
