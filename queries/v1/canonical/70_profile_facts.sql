-- @staging nsysql_stage._load_facts, raw_call_extent, raw_capture, raw_env, raw_extents, raw_gpu_extent, raw_meta
-- @staging raw_nvtx_aten, raw_nvtx_mark_extent, raw_nvtx_range_extent, raw_osrt_extent, raw_strings
-- @defines profile_facts

-- nsysql canonical schema v1: facts about the profile as a whole.
-- The loader first writes `nsysql_stage._load_facts` (source path, size, tables read); this file adds what the data says.

CREATE OR REPLACE TEMP TABLE _version AS
WITH meta AS (
  SELECT max(CASE WHEN name = 'EXPORT_PRODUCT_VERSION' THEN value END) AS v,
         max(CASE WHEN name = 'EXPORT_SCHEMA_VERSION' THEN value END) AS schema_v
  FROM raw_meta
), env AS (
  SELECT max(regexp_extract(value, '(20[0-9]{2}\.[0-9]+(\.[0-9]+)*)', 1)) AS v
  FROM raw_env WHERE name = 'TargetInstallDir'
), paths AS (
  SELECT max(regexp_extract(value, '(?i)nsight[-_ ]?systems[-/_ ]?(20[0-9]{2}\.[0-9]+(\.[0-9]+)*)', 1)) AS v
  FROM raw_strings WHERE value ILIKE '%nsight%systems%'
)
SELECT
  coalesce(meta.v, nullif(env.v, ''), nullif(paths.v, '')) AS nsys_version,
  CASE WHEN meta.v IS NOT NULL THEN 'export metadata'
       WHEN nullif(env.v, '') IS NOT NULL THEN 'TARGET_INFO_SYSTEM_ENV TargetInstallDir (capture version)'
       WHEN nullif(paths.v, '') IS NOT NULL THEN 'an install path in StringIds (inferred)'
  END AS version_source,
  nullif(env.v, '') AS capture_version,
  meta.schema_v AS schema_version
FROM meta, env, paths;

-- The distributed rank of the profiled process: RANK (else OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID) from
-- the process environment nsys captured (META_DATA_CAPTURE), else from TARGET_INFO_SYSTEM_ENV. A rank is a C int
-- of MPI (0 .. 2^31-1), as for the `MPI Rank N` thread names (ranks_processes.sql): a value with a larger number
-- names no rank, whatever its size, and the next variable is read as if it were absent.
CREATE OR REPLACE TEMP TABLE _rank AS
WITH vars AS (
  SELECT regexp_extract(value, '^([A-Z_]+)=', 1) AS var, regexp_extract(value, '^[A-Z_]+="?([0-9]+)"?$', 1) AS v,
         'process environment (META_DATA_CAPTURE)' AS source, 1 AS pri
  FROM raw_capture WHERE name LIKE '%ENVIRONMENT%'
  UNION ALL
  SELECT name, regexp_extract(value, '^"?([0-9]+)"?$', 1), 'TARGET_INFO_SYSTEM_ENV', 2 FROM raw_env
)
SELECT v AS rank, source FROM vars
WHERE var IN ('RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK', 'SLURM_PROCID') AND TRY_CAST(v AS INTEGER) IS NOT NULL
ORDER BY pri, CASE var WHEN 'RANK' THEN 0 WHEN 'OMPI_COMM_WORLD_RANK' THEN 1 WHEN 'PMI_RANK' THEN 2 ELSE 3 END
LIMIT 1;

-- The span is the extent of every timed table the export has; `span_from` names those that have events.
-- Scheduling events and CPU samples are staged as their first and last timestamp only (raw_extents), and so are
-- the GPU ops that gpu_ops holds (raw_gpu_extent), the CUDA API calls that api_calls holds (raw_call_extent), the
-- OS runtime calls that os_calls holds (raw_osrt_extent) and the NVTX ranges and marks that nvtx_ranges and
-- nvtx_marks hold (the raw_nvtx_*_extent tables, by 50_nvtx.sql's rules). A question that reads none of those
-- tables (a cold `kernels` reads no NVTX range, a cold `api` no GPU op) reads none of their rows.
CREATE OR REPLACE TEMP TABLE _extents AS
SELECT 1 AS ord, 'GPU ops' AS what, min(start) AS s, max("end") AS e FROM raw_gpu_extent
UNION ALL SELECT 2, 'CUDA API calls', min(start), max("end") FROM raw_call_extent
UNION ALL SELECT 3, 'NVTX ranges', min(start), max("end") FROM raw_nvtx_range_extent
UNION ALL SELECT 4, 'NVTX marks', min(start), max("end") FROM raw_nvtx_mark_extent
UNION ALL SELECT 5, 'OS runtime calls', min(start), max("end") FROM raw_osrt_extent
UNION ALL SELECT 6, 'scheduling events', min(start), max("end") FROM raw_extents WHERE source = 'SCHED_EVENTS'
UNION ALL SELECT 7, 'CPU samples', min(start), max("end") FROM raw_extents WHERE source = 'COMPOSITE_EVENTS';

CREATE OR REPLACE TEMP TABLE _span AS
SELECT min(s) AS start_ns, max(e) AS end_ns, string_agg(what, ', ' ORDER BY ord) AS span_from
FROM _extents WHERE s IS NOT NULL;

-- Frameworks and libraries that ran, each from names the export holds (StringIds: kernel, function, thread and
-- module names; NVTX range names, inline text included). One rule per framework or library: the pattern its names
-- match (a constant, so that DuckDB compiles each regular expression once) and what such a name is. A framework
-- found decides advice (pin_memory=True is PyTorch's); none found means the export does not show one, not that
-- none ran.
CREATE OR REPLACE TEMP TABLE _libraries AS
WITH names AS (SELECT DISTINCT value AS name FROM raw_strings WHERE value IS NOT NULL), hits AS (
  SELECT 1 AS ord, name FROM names  -- PyTorch
  WHERE regexp_matches(name, '(^|[^A-Za-z0-9_])at::(native|cuda)::|^aten::|(^|/)libtorch(_cuda|_cpu|_python)?\.so|^pt_autograd_[0-9]+$')
  -- operator ranges with inline text (not in StringIds; a range named by textId is among `names`); a prefix
  -- test, as there may be one name per op call
  UNION SELECT 1, text FROM raw_nvtx_aten
  UNION ALL SELECT 2, name FROM names WHERE regexp_matches(name, '(^|/)libcudnn[A-Za-z_]*\.so|cudnn::|^cudnn')
  UNION ALL SELECT 3, name FROM names WHERE regexp_matches(name, '(^|/)libcublas(Lt)?\.so|^cublas|cublasLt|^nvjet')
  UNION ALL SELECT 4, name FROM names WHERE regexp_matches(name, '(^|/)libnccl\.so|^nccl[A-Z]|ncclDevKernel|ncclKernel')
)
SELECT r.ord, r.kind, r.name, r.what, count(*) AS n, first(h.name ORDER BY length(h.name), h.name) AS example
FROM hits h
JOIN (VALUES
  (1, 'framework', 'PyTorch',
   'libtorch functions or kernels (at::native::), aten:: op ranges, a libtorch library loaded or PyTorch''s autograd thread'),
  (2, 'library', 'cuDNN', 'cuDNN kernels or its library loaded'),
  (3, 'library', 'cuBLAS', 'cuBLAS kernels or calls, or its library loaded'),
  (4, 'library', 'NCCL', 'NCCL kernels or calls, or its library loaded')
) r(ord, kind, name, what) USING (ord)
GROUP BY ALL;

-- Key/value facts; every value is text.
CREATE OR REPLACE TABLE profile_facts AS
SELECT
  -- fact name: source_path, source_bytes, nsys_version, version_source, capture_version, schema_version,
  -- span_start_ns, span_end_ns, span_ns, span_from, canonical_schema, nsysql_version, tables_read, and others;
  -- `framework` / `library` (one row each: `PyTorch`; `cuDNN`, `cuBLAS`, `NCCL`) with `framework_evidence` /
  -- `library_evidence` (`PyTorch: 17 names ... e.g. `pt_autograd_0``)
  key,
  -- fact value, as text
  value
FROM (
  SELECT key, value FROM nsysql_stage._load_facts
  UNION ALL SELECT 'nsys_version', nsys_version FROM _version
  UNION ALL SELECT 'version_source', version_source FROM _version
  UNION ALL SELECT 'capture_version', capture_version FROM _version
  UNION ALL SELECT 'schema_version', schema_version FROM _version
  UNION ALL SELECT 'span_start_ns', start_ns::VARCHAR FROM _span
  UNION ALL SELECT 'span_end_ns', end_ns::VARCHAR FROM _span
  UNION ALL SELECT 'span_ns', (end_ns - start_ns)::VARCHAR FROM _span
  UNION ALL SELECT 'span_from', span_from FROM _span
  UNION ALL SELECT 'rank', rank FROM _rank
  UNION ALL SELECT 'rank_source', source FROM _rank
  UNION ALL SELECT kind, name FROM _libraries
  UNION ALL SELECT kind || '_evidence', name || ': ' || n || ' name' || CASE WHEN n > 1 THEN 's' ELSE '' END
    || ' in the export (' || what || '), e.g. `' || left(example, 80) || '`' FROM _libraries
)
WHERE value IS NOT NULL;
