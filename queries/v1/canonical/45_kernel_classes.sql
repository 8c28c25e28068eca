-- @include 05_strings.sql, 44_kernel_rules.sql
-- @staging raw_kernel
-- @tables kernel_rules, strings
-- @defines kernel_classes
-- @empty_without raw_kernel

-- nsysql canonical schema v1: what each kernel name does, by the rules of kernel_rules (44_kernel_rules.sql).

-- One row per kernel name of the export (gpu_ops.name_id of kind `kernel`, the demangled name): the first rule
-- by priority whose pattern matches the lowercased name; `other` / `unknown` when none does. Matched
-- once per distinct name (a few hundred), never per kernel launch. Read from the staging table, as gpu_busy
-- is, so that it need not wait for gpu_ops (the same ids: gpu_ops.name_id is the kernel's demangledName).
CREATE OR REPLACE TABLE kernel_classes AS
WITH names AS (
  SELECT DISTINCT k.demangledName AS name_id, s.value AS name
  FROM raw_kernel k
  LEFT JOIN strings s ON s.id = k.demangledName  -- a name missing from StringIds matches no rule: other
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
  -- yes, no or unknown: whether the kernel runs on tensor cores, as far as its name says
  coalesce(m.tensor_cores, 'unknown') AS tensor_cores,
  -- kernel_rules.priority of the rule that decided, NULL when none matched
  m.priority AS rule
FROM names n
LEFT JOIN matched m USING (name_id);
