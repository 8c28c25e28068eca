-- nsysql canonical schema v1: shared rules, defined once and used by every canonical and analysis query.
-- The macros and types are created in the canonical database itself, so they are stored in each cache entry
-- and every connection that reads the canonical tables (warm or cold, the `sql` sandbox) calls the same ones.
-- Each macro's arguments and result are documented Perfetto-stdlib style: a comment above each argument, and
-- one above `AS` for the result.

-- The family of a numbered name: the name without its trailing number and any separators before it
-- (` `, `_`, `#`, `:`, `-`), so `Batch 3`, `Batch_3` and `Batch#3` are of family `Batch`. A name that does
-- not end in a digit is its own family; a name of digits and separators only has the family ''.
CREATE OR REPLACE MACRO family_name(
  -- VARCHAR: a name (an NVTX range's, say)
  name
)
-- VARCHAR: the name's family
AS regexp_replace(name, '[ _#:-]*[0-9]+$', '');

-- The number of a numbered name: its trailing digits (`Batch_12` -> 12).
CREATE OR REPLACE MACRO family_number(
  -- VARCHAR: a name
  name
)
-- HUGEINT: the trailing number; NULL when the name does not end in a digit
AS try_cast(regexp_extract(name, '([0-9]+)$', 1) AS HUGEINT);

-- How a family is shown: its name and `*` (`Batch*`) where the name is numbered; the name itself otherwise.
CREATE OR REPLACE MACRO family_label(
  -- VARCHAR: a name
  name
)
-- VARCHAR: the label
AS CASE WHEN family_name(name) = name THEN name ELSE family_name(name) || '*' END;

-- Whether a name is `stem` followed by a number (and perhaps separators before it): `Batch_3` is in the
-- family `Batch` and in `Batch_`, not in `Batch_3` itself nor in `Bat`.
CREATE OR REPLACE MACRO in_family(
  -- VARCHAR: a name
  name,
  -- VARCHAR: the family asked for, as a user writes it (`--range Batch`)
  stem
)
-- BOOLEAN: true when name = stem || separators || digits
AS length(name) > length(stem) AND starts_with(name, stem) AND family_name(substr(name, length(stem) + 1)) = '';

-- The directions of a memory copy: CUPTI's CUpti_ActivityMemcpyKind, numbered as nsys stores them in
-- CUPTI_ACTIVITY_KIND_MEMCPY.copyKind. Table macro: `FROM copy_kinds()`.
CREATE OR REPLACE MACRO copy_kinds()
-- TABLE(id INTEGER, label VARCHAR): one row per direction
AS TABLE SELECT * FROM (VALUES
  (0, 'Unknown'), (1, 'Host-to-Device'), (2, 'Device-to-Host'), (3, 'Host-to-Array'), (4, 'Array-to-Host'),
  (5, 'Array-to-Array'), (6, 'Array-to-Device'), (7, 'Device-to-Array'), (8, 'Device-to-Device'),
  (9, 'Host-to-Host'), (10, 'Peer-to-Peer'), (11, 'Unified Host-to-Device'), (12, 'Unified Device-to-Host'),
  (13, 'Unified Device-to-Device')
) t(id, label);

-- gpu_ops.copy_kind's type: the labels of copy_kinds(), in id order (an ENUM: one byte a row).
CREATE TYPE copy_kind_enum AS ENUM (SELECT label FROM copy_kinds() ORDER BY id);

-- A CUDA API function's name as nsys prints it: a four-digit version suffix dropped (`cudaLaunchKernel_v7000`
-- -> `cudaLaunchKernel`), longer ones kept (`cudaLaunchKernelExC_v11060`, `cudaGraphLaunch_v10000`).
CREATE OR REPLACE MACRO api_display_name(
  -- VARCHAR: the name as the export stores it
  name
)
-- VARCHAR: the name nsys stats prints
AS CASE WHEN name SIMILAR TO '.*_v[0-9]{4}' THEN name[:-7] ELSE name END;

-- The union of intervals, per key: the stretches in which at least one interval of the key is open, merged
-- where they overlap or touch, each with the length of the key's stretches before it. gpu_busy
-- (80_gpu_busy.sql) is this union of each device's GPU ops; the analyses take it of a subset (the compute or
-- the communication kernels of a device) and measure overlaps by inclusion and exclusion, as Perfetto's
-- intervals/overlap.sql does: |A and B| = |A| + |B| - |A or B|.
-- How (one sort, then passes in that order): the intervals sorted by key and start feed windows with an empty
-- OVER (), which DuckDB computes as one streaming pass each, in the order of their input (DuckDB's
-- order-preservation rules: a window with an empty OVER clause keeps its input's order). Per-key windows would
-- sort once per window and take the running maximum through a segment tree, at more CPU. A window over all
-- keys at once keeps each key apart by carrying the key in the high 64 bits of a HUGEINT (a later key's values
-- always compare higher). Should DuckDB ever hand the passes their input out of order, the query fails
-- (error() below) instead of returning wrong stretches.
CREATE OR REPLACE MACRO union_stretches(
  -- TABLE(key BIGINT, start_ns BIGINT, end_ns BIGINT): the intervals, none with a NULL key, start or end, and
  -- none ending before it starts (a table or CTE name)
  intervals
)
-- TABLE(key, start_ns, end_ns, busy_before_ns, prev_end_ns): one row per stretch; busy_before_ns: the length
-- of the key's stretches before start_ns, so that the covered time inside any window [a, b) is B(b) - B(a),
-- with B(t) = busy_before_ns + clamp(t - start_ns, 0, end_ns - start_ns) of the last stretch starting at or
-- before t (an ASOF join); prev_end_ns: the end of the key's stretch before (NULL for its first)
AS TABLE
WITH sorted AS (  -- plus one sentinel interval per key that starts after all others (and has no end): it starts
                  -- the stretch after the key's last, so that every real stretch has a successor (below)
  SELECT key, start_ns, end_ns FROM query_table(intervals)
  UNION ALL
  SELECT DISTINCT key, 9223372036854775807, NULL FROM query_table(intervals)
  ORDER BY key, start_ns
), upto AS (  -- the latest end among the key's intervals up to this one (in the high bits: the key)
  SELECT key, start_ns, max((key::HUGEINT << 64) + end_ns) OVER (ROWS UNBOUNDED PRECEDING) AS m
  FROM sorted
), before AS (  -- the same among the intervals before this one, and the previous one's place in the order
  SELECT key, start_ns, lag(m) OVER () AS pm, lag(key) OVER () AS p_key, lag(start_ns) OVER () AS p_start
  FROM upto
), starts AS (  -- intervals that start a stretch: every earlier interval of the key has ended before they start.
                -- prev_end: the end of the stretch before (NULL for the key's first). Intervals that start
                -- together may come in any order: one of them starts the stretch, with the same prev_end
  SELECT key, start_ns, prev_end FROM (
    SELECT key, start_ns,
           CASE WHEN pm >= (key::HUGEINT << 64) - (1::HUGEINT << 63)
                THEN (pm - (key::HUGEINT << 64))::BIGINT END AS prev_end,
           CASE WHEN p_key > key OR (p_key = key AND p_start > start_ns)
                THEN error('union_stretches: DuckDB passed the intervals out of order') END AS out_of_order
    FROM before)
  WHERE prev_end IS NULL OR start_ns > prev_end OR out_of_order IS NOT NULL
), stretches AS (  -- each stretch start, with the stretch before it: that one runs from its start to this one's
                   -- prev_end (when it is of the same key)
  SELECT key, prev_end, lag(key) OVER () AS p_key, lag(start_ns) OVER () AS p_start,
         lag(prev_end) OVER () AS p_prev_end
  FROM starts
), summed AS (  -- total length of the stretches listed so far (all keys)
  SELECT *, sum(CASE WHEN p_key = key THEN prev_end - p_start ELSE 0 END) OVER (ROWS UNBOUNDED PRECEDING) AS total
  FROM stretches
), offset_ AS (  -- that total at the key's first stretch start, where its own stretches begin to count (in the
                 -- high bits: the key; the total is shifted by 2^63 into the low 64 bits' unsigned range)
  SELECT *, max(CASE WHEN p_key IS DISTINCT FROM key
                     THEN (key::HUGEINT << 64) + total + (1::HUGEINT << 63) END)
              OVER (ROWS UNBOUNDED PRECEDING) - (key::HUGEINT << 64) - (1::HUGEINT << 63) AS key_total
  FROM summed
)
SELECT key, p_start AS start_ns, prev_end AS end_ns,
       (total - (prev_end - p_start) - key_total)::BIGINT AS busy_before_ns, p_prev_end AS prev_end_ns
FROM offset_
WHERE p_key = key;
