-- @include 00_macros.sql, 50_nvtx.sql
-- @staging raw_nvtx, raw_nvtx_payload, raw_payload_entries, raw_payload_enum_entries, raw_payload_enums
-- @staging raw_payload_schemas, raw_strings
-- @tables nvtx_ranges
-- @macros global_pid, global_tid
-- @defines le_uint, nvtx_payload_fields, nvtx_payload_types, nvtx_payloads
-- @empty_without raw_nvtx_payload

-- nsysql canonical schema v1: NVTX payloads (the NVTX payload extension, nvToolsExtPayload.h), decoded by the
-- export's own schema tables, whatever library wrote them (NCCL's collectives, nsys's Python sampling, ...).
-- The bytes are in NVTX_EVENTS.binaryData only when the report was exported with
-- `nsys export --type sqlite --include-blobs=true`; otherwise both tables are empty.
--
-- binaryData is the event's array of nvtxPayloadData_t as nsys stores it: a uint64 count n, then n records of
-- three uint64 (schemaId, size, offset of the payload's bytes from the start of binaryData), then the payloads.
-- All values are little-endian. A schema's entry lies at its `offset` from the start of its payload (or of the
-- array element that holds it); an entry that gives no offset is the first one (offset 0) or lies after the
-- entry before it, aligned to its own size (C's natural alignment, at most 8). Arrays: a fixed length
-- (NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, the length in arrayOrUnionDetail) or the value of another entry of
-- the same schema instance (ARRAY_LENGTH_INDEX, that entry's index in arrayOrUnionDetail); an entry whose type is
-- another schema id is that schema embedded (nested, at most 8 levels). A value that points outside the event's
-- bytes, or lies past its payload, is left out rather than guessed; NULL schema columns (flags, offsets, enum
-- values) are 0, as nsys writes zeros.

-- A little-endian unsigned integer from a hex text of bytes (DuckDB's hex() of a BLOB).
CREATE OR REPLACE MACRO le_uint(
  -- VARCHAR: hex() of the bytes
  h,
  -- BIGINT: byte offset of the integer's first byte
  o,
  -- INTEGER: its size in bytes (1 to 16)
  n
)
-- HUGEINT: the unsigned value; NULL when the bytes end before o + n
AS CASE WHEN o >= 0 AND 2 * (o + n) <= length(h) THEN
  list_sum([('0x' || substr(h, (2 * (o + k) + 1)::BIGINT, 2))::HUGEINT << (8 * k)::INTEGER FOR k IN range(n)])::HUGEINT
END;

-- The predefined entry types of the payload extension (NVTX_PAYLOAD_ENTRY_TYPE_*, with LP64 sizes: long, size_t
-- and pointers of 8 bytes, as on the Linux and Windows x86-64 / aarch64 hosts nsys records), how nsysql decodes
-- each, and its size. Table macro: `FROM nvtx_payload_types()`.
CREATE OR REPLACE MACRO nvtx_payload_types()
-- TABLE(type_id BIGINT, type VARCHAR, kind VARCHAR, size INTEGER): kind is `int` (signed), `uint`, `float`,
-- `char` (a character, text in arrays), `string_handle` (an nvtxStringHandle_t: a StringIds id), `pointer`
-- (an address into the program's memory: kept as a number, never followed) or `bytes`
AS TABLE SELECT * FROM (VALUES
  (1, 'char', 'char', 1), (2, 'uchar', 'uint', 1), (3, 'short', 'int', 2), (4, 'ushort', 'uint', 2),
  (5, 'int', 'int', 4), (6, 'uint', 'uint', 4), (7, 'long', 'int', 8), (8, 'ulong', 'uint', 8),
  (9, 'longlong', 'int', 8), (10, 'ulonglong', 'uint', 8), (11, 'int8', 'int', 1), (12, 'uint8', 'uint', 1),
  (13, 'int16', 'int', 2), (14, 'uint16', 'uint', 2), (15, 'int32', 'int', 4), (16, 'uint32', 'uint', 4),
  (17, 'int64', 'int', 8), (18, 'uint64', 'uint', 8), (19, 'float', 'float', 4), (20, 'double', 'float', 8),
  (21, 'longdouble', 'bytes', 16), (22, 'size', 'uint', 8), (23, 'address', 'pointer', 8),
  (24, 'wchar', 'uint', 4), (25, 'char8', 'char', 1), (26, 'char16', 'uint', 2), (27, 'char32', 'uint', 4),
  (32, 'byte', 'uint', 1), (33, 'int128', 'bytes', 16), (34, 'uint128', 'bytes', 16),
  (42, 'float16', 'bytes', 2), (43, 'float32', 'float', 4), (44, 'float64', 'float', 8),
  (45, 'float128', 'bytes', 16), (50, 'bf16', 'bytes', 2), (52, 'tf32', 'bytes', 4),
  (68, 'category', 'uint', 4), (69, 'color_argb', 'uint', 4), (70, 'scope_id', 'uint', 8),
  (71, 'pid_uint32', 'uint', 4), (72, 'pid_uint64', 'uint', 8), (73, 'tid_uint32', 'uint', 4),
  (74, 'tid_uint64', 'uint', 8), (75, 'cstring', 'char', 1), (76, 'cstring_utf8', 'char', 1),
  (80, 'string_handle', 'string_handle', 8)
) t(type_id, type, kind, size);

-- Every NVTX event with payload bytes, numbered, with its process, thread, name and domain.
CREATE OR REPLACE TEMP TABLE _pev AS
WITH domains AS (
  SELECT global_pid(n.globalTid) AS pid, n.domainId, any_value(coalesce(n.text, s.value)) AS domain
  FROM raw_nvtx n LEFT JOIN raw_strings s ON s.id = n.textId
  WHERE n.eventType = 75 AND n.domainId IS NOT NULL
  GROUP BY 1, 2
), ev AS (
  SELECT
    global_pid(p.globalTid) AS pid, global_tid(p.globalTid) AS tid, p.start, p."end", p.eventType,
    p.domainId, coalesce(p.text, s.value, '') AS name, hex(p.binaryData) AS h
  FROM raw_nvtx_payload p LEFT JOIN raw_strings s ON s.id = p.textId
)
SELECT
  row_number() OVER (ORDER BY ev.start, ev.pid, ev.tid, ev."end" DESC NULLS LAST, ev.h) AS event_id,
  ev.*, coalesce(d.domain, '') AS domain
FROM ev LEFT JOIN domains d ON d.pid = ev.pid AND d.domainId = ev.domainId;

-- Each event's range in nvtx_ranges: the same thread, start, end and name (duplicates paired in order).
CREATE OR REPLACE TEMP TABLE _pev_range AS
WITH a AS (
  SELECT event_id, pid, tid, start, "end", name,
         row_number() OVER (PARTITION BY pid, tid, start, "end", name ORDER BY event_id) AS k
  FROM _pev WHERE eventType IN (59, 60)
), b AS (
  SELECT range_id, pid, tid, start_ns, end_ns, name,
         row_number() OVER (PARTITION BY pid, tid, start_ns, end_ns, name ORDER BY range_id) AS k
  FROM nvtx_ranges
)
SELECT a.event_id, b.range_id
FROM a JOIN b ON a.pid = b.pid AND a.tid = b.tid AND a.start = b.start_ns AND a."end" = b.end_ns
  AND a.name = b.name AND a.k = b.k;

-- The payload records of each event's header. The event's bytes (_pev.h, as hex) are read where a value is
-- decoded, by event_id, never copied into the rows below: a copy per field, element and instance held the
-- whole payload once per value (27,506 payloads of 5.9 MB took 1.6 GB).
CREATE OR REPLACE TEMP TABLE _pdata AS
WITH n AS (
  SELECT event_id, domainId, h, length(h) // 2 AS nbytes, le_uint(h, 0, 8) AS cnt FROM _pev
), rec AS (
  -- a header that promises more records than the bytes hold is damaged: nothing of the event is decoded
  SELECT event_id, domainId, h, nbytes, unnest(range(cnt::BIGINT)) AS i
  FROM n WHERE cnt IS NOT NULL AND 8 + 24 * cnt <= nbytes
)
SELECT event_id, domainId, nbytes, i AS payload,
       le_uint(h, 8 + 24 * i, 8) AS schema_id, le_uint(h, 16 + 24 * i, 8) AS size,
       le_uint(h, 24 + 24 * i, 8) AS off
FROM rec;

-- Schema entries with their size, kind and offset (the layout rule in the header).
CREATE OR REPLACE TEMP TABLE _pent AS
WITH e AS (
  SELECT
    e.domainId, e.schemaId, e.idx, coalesce(e.flags, 0) AS flags, e.type AS type_id, e.name,
    coalesce(e.arrayOrUnionDetail, 0) AS detail, e."offset" AS given,
    coalesce(t.type, en.name, sc.name, CASE WHEN en.schemaId IS NOT NULL THEN 'enum' END,
             CASE WHEN sc.schemaId IS NOT NULL THEN 'schema ' || sc.schemaId END, 'type ' || e.type) AS type,
    CASE WHEN t.kind IS NOT NULL THEN t.kind WHEN en.schemaId IS NOT NULL THEN 'enum'
         WHEN sc.schemaId IS NOT NULL THEN 'nested' END AS kind,
    coalesce(t.size, en.size, sc.payloadSize)::BIGINT AS size
  FROM raw_payload_entries e
  LEFT JOIN nvtx_payload_types() t ON t.type_id = e.type
  -- an entry type that is an enum or another schema: of the same domain, else the only one of that id
  LEFT JOIN raw_payload_enums en ON en.schemaId = e.type AND (en.domainId = e.domainId
             OR NOT EXISTS (SELECT 1 FROM raw_payload_enums x WHERE x.schemaId = e.type AND x.domainId = e.domainId))
  LEFT JOIN raw_payload_schemas sc ON sc.schemaId = e.type AND (sc.domainId = e.domainId
             OR NOT EXISTS (SELECT 1 FROM raw_payload_schemas x WHERE x.schemaId = e.type AND x.domainId = e.domainId))
)
SELECT * EXCLUDE (given),
  coalesce(given, CASE WHEN idx = 0 THEN 0 ELSE
    (lag(given) OVER w + lag(size) OVER w + least(size, 8) - 1) // least(size, 8) * least(size, 8) END) AS off
FROM e
WINDOW w AS (PARTITION BY domainId, schemaId ORDER BY idx);

-- Schema instances to decode: each payload whose schema the export declares, then each element of an entry
-- that embeds another schema. base: the byte offset of the instance in the event's bytes; end_: where its
-- payload ends; path: `Frames[3].` for the fields inside; field: the same without element numbers.
CREATE OR REPLACE TEMP TABLE _pinst AS
WITH RECURSIVE top AS (
  SELECT d.event_id, d.payload, s.domainId, s.schemaId, d.off AS base, d.off + d.size AS end_
  FROM _pdata d
  JOIN raw_payload_schemas s ON s.schemaId = d.schema_id AND (s.domainId = d.domainId
       OR NOT EXISTS (SELECT 1 FROM raw_payload_schemas x WHERE x.schemaId = d.schema_id AND x.domainId = d.domainId))
  WHERE d.off + d.size <= d.nbytes
), inst AS (
  SELECT event_id, payload, domainId, schemaId, base::HUGEINT AS base, end_::HUGEINT AS end_,
         '' AS path, '' AS field, NULL::BIGINT AS element, 0 AS depth
  FROM top
  UNION ALL
  SELECT i.event_id, i.payload, s.domainId, s.schemaId, i.base + e.off + k.k * e.size, i.end_,
         i.path || e.name || '[' || k.k || '].', i.field || e.name || '.', k.k, i.depth + 1
  FROM inst i
  JOIN _pev p ON p.event_id = i.event_id
  JOIN _pent e ON e.domainId = i.domainId AND e.schemaId = i.schemaId AND e.kind = 'nested'
  JOIN raw_payload_schemas s ON s.schemaId = e.type_id AND s.domainId = e.domainId
  LEFT JOIN _pent n ON n.domainId = e.domainId AND n.schemaId = e.schemaId AND n.idx = e.detail
  -- never more elements than fit in the payload's bytes
  CROSS JOIN LATERAL (SELECT unnest(range(least(CASE e.flags & 112
      WHEN 0 THEN 1 WHEN 16 THEN e.detail
      WHEN 48 THEN coalesce(le_uint(p.h, (i.base + n.off)::BIGINT, n.size::INTEGER), 0) ELSE 0 END,
      greatest(i.end_ - i.base - e.off, 0) // e.size)::BIGINT)) AS k) k
  WHERE i.depth < 8 AND e.size > 0
)
SELECT * FROM inst;

-- Leaf values: every entry of every instance that is not itself a schema, one row per array element.
CREATE OR REPLACE TEMP TABLE _pleaf AS
SELECT
  i.event_id, i.payload, e.domainId, e.schemaId, e.idx, e.name, e.type, e.type_id, e.kind, e.size,
  e.flags & 112 AS arr, i.path, i.field, i.element, i.end_,
  i.base + e.off AS pos,
  -- never more elements than fit in the payload's bytes
  least(CASE e.flags & 112 WHEN 0 THEN 1 WHEN 16 THEN e.detail
       WHEN 48 THEN coalesce(le_uint(p.h, (i.base + n.off)::BIGINT, n.size::INTEGER), 0) ELSE 0 END,
       greatest(i.end_ - i.base - e.off, 0) // greatest(e.size, 1)) AS cnt
FROM _pinst i
JOIN _pev p ON p.event_id = i.event_id
JOIN _pent e ON e.domainId = i.domainId AND e.schemaId = i.schemaId AND coalesce(e.kind, '') <> 'nested'
LEFT JOIN _pent n ON n.domainId = e.domainId AND n.schemaId = e.schemaId AND n.idx = e.detail;

-- One row per decoded value. Characters in an array (a C string: `char name[32]`) are one text value, up to
-- the first NUL; any other array is one row per element.
CREATE OR REPLACE TEMP TABLE _pval AS
WITH chars AS (
  SELECT l.*, NULL::BIGINT AS k, NULL::HUGEINT AS u,
    CASE WHEN l.pos + l.cnt <= l.end_ THEN
      regexp_replace(decode(unhex(substr(p.h, (2 * l.pos + 1)::BIGINT, (2 * l.cnt)::BIGINT))), chr(0) || '.*$', '', 's')
    END AS txt, NULL::VARCHAR AS hex
  FROM _pleaf l JOIN _pev p ON p.event_id = l.event_id WHERE l.kind = 'char' AND l.arr <> 0
), elems AS (
  SELECT l.*, k.k, CASE WHEN l.pos + (k.k + 1) * l.size <= l.end_ AND l.size <= 16
                        THEN le_uint(p.h, (l.pos + k.k * l.size)::BIGINT, l.size::INTEGER) END AS u,
         -- the hex bytes of a value of a type nsysql does not decode (nvtx_payload_fields.value)
         CASE WHEN l.kind = 'bytes' THEN substr(p.h, (2 * (l.pos + k.k * l.size) + 1)::BIGINT, (2 * l.size)::BIGINT)
         END AS hex
  FROM _pleaf l
  JOIN _pev p ON p.event_id = l.event_id
  CROSS JOIN LATERAL (SELECT unnest(range(l.cnt::BIGINT)) AS k) k
  WHERE NOT (l.kind = 'char' AND l.arr <> 0)
)
SELECT * EXCLUDE (txt), txt FROM chars
UNION ALL BY NAME
SELECT *, NULL::VARCHAR AS txt FROM elems;

-- One row per NVTX event with a binary payload (an event may carry several payloads).
CREATE OR REPLACE TABLE nvtx_payloads AS
SELECT
  -- row number of the event among those with payloads, in time order (nvtx_payload_fields.event_id)
  v.event_id,
  -- nvtx_ranges.range_id of the event when it is a range; NULL for a mark
  r.range_id,
  -- `range` or `mark`
  CASE WHEN v.eventType IN (59, 60) THEN 'range' ELSE 'mark' END AS event,
  -- process id
  v.pid,
  -- thread id
  v.tid,
  -- start (a mark's time), ns
  v.start AS start_ns,
  -- end, ns; NULL for a mark
  v."end" AS end_ns,
  -- event text, e.g. `ncclAllReduce`
  v.name,
  -- NVTX domain name, e.g. `NCCL`; '' for the default domain
  v.domain,
  -- index of the payload among the event's payloads (0 for the first)
  d.payload,
  -- schema id of the payload (NVTX_PAYLOAD_SCHEMAS.schemaId)
  try_cast(d.schema_id AS BIGINT) AS schema_id,
  -- schema name as registered; NULL when it has none
  s.name AS schema,
  -- payload size, bytes
  try_cast(d.size AS BIGINT) AS bytes,
  -- true when the export declares the payload's schema and its bytes lie within the event's data: its fields
  -- are in nvtx_payload_fields
  coalesce(s.schemaId IS NOT NULL AND d.off + d.size <= d.nbytes, false) AS decoded
FROM _pev v
LEFT JOIN _pdata d USING (event_id)
LEFT JOIN _pev_range r USING (event_id)
LEFT JOIN raw_payload_schemas s ON s.schemaId = d.schema_id AND (s.domainId = d.domainId
     OR NOT EXISTS (SELECT 1 FROM raw_payload_schemas x WHERE x.schemaId = d.schema_id AND x.domainId = d.domainId))
ORDER BY v.event_id, d.payload;

-- Each value as an integer (two's complement for signed types) and as a float (IEEE 754). A view: the fields
-- below read each value once, so it is computed as they are written, never held as a table beside them.
CREATE OR REPLACE TEMP VIEW _pnum AS
SELECT *,
  CASE WHEN kind = 'int' AND u >= (1::HUGEINT << (8 * size - 1)::INTEGER) THEN u - (1::HUGEINT << (8 * size)::INTEGER)
       WHEN kind IN ('int', 'uint', 'pointer', 'string_handle', 'enum') THEN u END AS i,
  CASE WHEN kind = 'float' AND size = 4 THEN
         (CASE WHEN (u >> 31) = 1 THEN -1 ELSE 1 END) * CASE ((u >> 23) & 255)
           WHEN 0 THEN (u & 8388607) * pow(2, -149)
           WHEN 255 THEN (CASE WHEN (u & 8388607) = 0 THEN 'inf'::DOUBLE ELSE 'nan'::DOUBLE END)
           ELSE (1 + (u & 8388607) / 8388608.0) * pow(2, ((u >> 23) & 255) - 127) END
       WHEN kind = 'float' AND size = 8 THEN
         (CASE WHEN (u >> 63) = 1 THEN -1 ELSE 1 END) * CASE ((u >> 52) & 2047)
           WHEN 0 THEN (u & 4503599627370495) * pow(2, -1074)
           WHEN 2047 THEN (CASE WHEN (u & 4503599627370495) = 0 THEN 'inf'::DOUBLE ELSE 'nan'::DOUBLE END)
           ELSE (1 + (u & 4503599627370495) / 4503599627370496.0) * pow(2, ((u >> 52) & 2047) - 1023) END
  END::DOUBLE AS f
FROM _pval;

-- One row per decoded payload field (per element for arrays): (event, field, value), typed as the schema says.
CREATE OR REPLACE TABLE nvtx_payload_fields AS
SELECT
  -- nvtx_payloads.event_id
  v.event_id,
  -- nvtx_payloads.payload
  v.payload,
  -- the entry's name in its schema, after the names of the entries that embed it: `Message size [bytes]`,
  -- `Frames.Function`; `#<index>` for an entry without a name
  v.field || coalesce(v.name, '#' || v.idx) AS field,
  -- the same with the array elements it lies in: `Frames[3].Function`, and `[k]` after an element of an array
  -- of values
  v.path || coalesce(v.name, '#' || v.idx) || CASE WHEN v.arr <> 0 AND v.k IS NOT NULL THEN '[' || v.k || ']' ELSE '' END AS path,
  -- index of the entry in its schema (NVTX_PAYLOAD_SCHEMA_ENTRIES.idx)
  v.idx AS entry,
  -- index of the innermost array element the value lies in (the value's own in an array of values, else the
  -- embedding entry's: k of `Frames[k].Function`); NULL when in no array
  CASE WHEN v.arr <> 0 AND v.k IS NOT NULL THEN v.k ELSE v.element END AS element,
  -- the entry's type: a predefined type (`uint64`, `int`, `size`, `double`, `string_handle`, ...), else the
  -- name of the enum it is (`enum` when unnamed)
  v.type,
  -- the value as an integer (integers, enums, string handles, pointers); NULL for other types and beyond BIGINT
  -- (a uint64 above 2^63 - 1: see value)
  try_cast(v.i AS BIGINT) AS int_value,
  -- the value of a float or double; NULL for other types
  v.f AS float_value,
  -- the value as text: an enum's label, a string handle's string (StringIds; NULL where StringIds lacks the
  -- handle, whose number int_value keeps: the number is no name), a character array's text, the exact decimal
  -- of an integer (also beyond BIGINT) or float, the hex bytes of types nsysql does not decode (long double,
  -- float16, bf16, 128-bit)
  coalesce(
    v.txt,
    CASE v.kind
      WHEN 'enum' THEN coalesce(ee.name, v.i::VARCHAR)
      WHEN 'string_handle' THEN st.value
      WHEN 'float' THEN v.f::VARCHAR
      WHEN 'bytes' THEN v.hex
      ELSE v.i::VARCHAR END
  ) AS value
FROM _pnum v
LEFT JOIN raw_payload_enum_entries ee
  ON v.kind = 'enum' AND ee.schemaId = v.type_id AND ee.domainId = v.domainId AND coalesce(ee.value, 0) = v.u
LEFT JOIN raw_strings st ON v.kind = 'string_handle' AND st.id = v.u
WHERE v.u IS NOT NULL OR v.txt IS NOT NULL
ORDER BY v.event_id, v.payload, v.pos + coalesce(v.k, 0) * v.size, v.idx;
