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
