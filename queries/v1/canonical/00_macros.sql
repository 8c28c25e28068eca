-- @defines api_display_name, copy_kind_enum, copy_kinds, exact_stddev, exact_weighted_mean, family_label, family_name
-- @defines family_number, global_pid, global_tid, in_family, is_exact_duration, is_exact_whole, is_host_copy
-- @defines is_interval, is_torch_backward_node, is_torch_op, is_torch_range, kernel_tensor_cores
-- @defines metric_sums_by_window, op_launch_ns, ops_by_iteration, overlaps_by_bucket, range_family
-- @defines range_family_label, range_op_name, stats_durations, stats_stddev, tensor_cores_evidence
-- @defines torch_evaluated_node, torch_op_name, torch_op_seq, torch_op_sizes, union_stretches, union_stretches_keyed
-- @defines union_stretches_one_key

-- nsysql canonical schema v1: shared rules, defined once and used by every canonical and analysis query.
-- The macros and types are created in the canonical database itself, so they are stored in each cache entry
-- and every connection that reads the canonical tables (warm or cold, the `sql` sandbox) calls the same ones.
-- Each macro's arguments and result are documented Perfetto-stdlib style: a comment above each argument, and
-- one above `AS` for the result.

-- One transaction for the whole file: a statement outside one is a commit of its own, a write of the entry's
-- log that every canonical file waits for (this one comes first), once per statement.
BEGIN TRANSACTION;

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

-- Whether a GPU op is a copy between host and device memory (arrays are device memory): one that crosses the bus
-- (PCIe or C2C). Device-to-device and peer copies stay on the GPUs; unified memory's page migrations are no copy
-- the program issued.
CREATE OR REPLACE MACRO is_host_copy(
  -- VARCHAR: gpu_ops.kind
  kind,
  -- copy_kind_enum: gpu_ops.copy_kind
  copy_kind
)
-- BOOLEAN: false, not NULL, for other ops
AS coalesce(kind = 'memcpy'
            AND copy_kind::VARCHAR IN ('Host-to-Device', 'Device-to-Host', 'Host-to-Array', 'Array-to-Host'), false);

-- The process id in an nsys globalTid or globalPid: nsys packs hardware id, VM id, process id and thread id
-- into one 64-bit number, the process id in bits 24 to 47 (as nsys's own stats scripts decode it).
CREATE OR REPLACE MACRO global_pid(
  -- BIGINT: a globalTid or globalPid
  g
)
-- BIGINT: the process id
AS (g >> 24) & 16777215;

-- The thread id in an nsys globalTid: its low 24 bits.
CREATE OR REPLACE MACRO global_tid(
  -- BIGINT: a globalTid
  g
)
-- BIGINT: the thread id
AS g & 16777215;

-- Whether [start, end] is an interval of time nsysql counts: both known, the end not before the start, and both
-- inside [-2^62, 2^62) ns, +-146 years from the clock's zero, which holds any clock nsys records (session-relative,
-- or ns since 1970 until 2116). A time beyond that is no time a clock gave (a sentinel such as INT64_MAX): the
-- tables leave such rows out, data_quality counts them (95_data_quality.sql), and no duration or difference of
-- two times can overflow 64 bits.
CREATE OR REPLACE MACRO is_interval(
  -- BIGINT: start, ns
  s,
  -- BIGINT: end, ns
  e
)
-- BOOLEAN: false, not NULL, when either is NULL
AS coalesce(s <= e AND s >= -4611686018427387904 AND e < 4611686018427387904, false);

-- Whether a duration's square is summed exactly (stats_stddev): a whole number of ns within 2^40 (18 minutes)
-- either way, so that the sum of n squares stays below HUGEINT's 2^127 for any n below 2^47.
CREATE OR REPLACE MACRO is_exact_duration(
  -- a numeric column (durations in ns)
  x
)
-- BOOLEAN
AS x BETWEEN -1099511627776 AND 1099511627776 AND x = trunc(x);

-- The sample standard deviation of n values x, each counted w times (n = the sum of w), from exact sums: of the
-- values and of their squares, as sqrt((n s2 - s1^2) / (n (n - 1))), the numerator an exact integer rounded
-- once to a double. Exact sums are the same whatever order the rows are summed in, where a floating-point one
-- (stddev_samp's) takes its last digits from the order DuckDB's threads finish in, which changes from run to
-- run. NULL where they cannot be exact: a value that is not is_exact_duration, or n s2 of 1e37 or more (as a
-- double says it: HUGEINT holds 1.7e38); the caller then gives its floating-point figure. 0 for fewer than two
-- values. An aggregate.
CREATE OR REPLACE MACRO exact_stddev(
  -- a numeric column (durations in ns)
  x,
  -- how many times each row's value counts (1: once)
  w,
  -- the number of values: count(x), or the sum of w
  n
)
-- DOUBLE
AS CASE WHEN bool_and(is_exact_duration(x)) AND n * sum(w * x::DOUBLE * x) < 1e37
        THEN CASE WHEN n < 2 THEN 0::DOUBLE
                  ELSE sqrt(greatest(n::HUGEINT * sum(w * x::HUGEINT * x) FILTER (WHERE is_exact_duration(x))
                                     - sum(w * x)::HUGEINT * sum(w * x), 0)::DOUBLE / (n::DOUBLE * (n - 1))) END
        END;

-- The standard deviation column of `nsys stats` summaries (cuda_gpu_kern_sum, cuda_api_sum, nvtx_sum): the
-- sample standard deviation, 0 (not NULL) for a name seen once. An aggregate: use it where `stddev_samp` goes.
-- From exact sums (exact_stddev), so that the same rows give the same bits on every run; stddev_samp's where
-- they cannot be exact.
CREATE OR REPLACE MACRO stats_stddev(
  -- a numeric column (durations in ns)
  x
)
-- DOUBLE: the sample standard deviation, 0 for one value
AS coalesce(exact_stddev(x, 1, count(x)), stddev_samp(x), 0);

-- The duration columns of `nsys stats` summaries (cuda_gpu_kern_sum, cuda_api_sum, nvtx_sum), as nsys computes
-- them: the sum, mean, median (the mean of the two middle values for an even count), minimum, maximum and
-- stats_stddev of a group's durations. An aggregate: `unnest(stats_durations(d))` in a grouped SELECT gives
-- the six columns in that order.
CREATE OR REPLACE MACRO stats_durations(
  -- BIGINT: a duration column, ns
  x
)
-- STRUCT(total_ns BIGINT, avg_ns DOUBLE, med_ns DOUBLE, min_ns, max_ns, stddev_ns DOUBLE): min_ns and max_ns of
-- x's type
AS {'total_ns': sum(x)::BIGINT, 'avg_ns': avg(x), 'med_ns': median(x), 'min_ns': min(x), 'max_ns': max(x),
    'stddev_ns': stats_stddev(x)};

-- PyTorch operator ranges. Under torch.autograd.profiler.emit_nvtx() each operator call is a push/pop range
-- named `<op>[, seq = N][, op_id = N][, sizes = [[...], ...]][, input_op_ids = [...]]` (`op_id` and
-- `input_op_ids` since torch 1.x's record_shapes rework; DLProf-era exports have `aten::conv2d, seq = 0` or a
-- bare `aten::empty`), and each backward node `AddmmBackward0, seq = N, ...` inside an
-- `autograd::engine::evaluate_function: AddmmBackward0, ...` range. `seq` is the autograd sequence number:
-- a backward node carries the seq of the forward op that created it.

-- An operator's name without its arguments: `aten::addmm, seq = 5, op_id = 9, sizes = [...]` -> `aten::addmm`.
CREATE OR REPLACE MACRO torch_op_name(
  -- VARCHAR: an NVTX range's name
  name
)
-- VARCHAR: the name up to its first `, seq = `, `, op_id = `, `, sizes = ` or `, input_op_ids = `; the name
-- itself when it has none
AS regexp_replace(name, '(?s), (seq|op_id|sizes|input_op_ids) = .*$', '');

-- The autograd sequence number of an operator or backward-node range (`..., seq = 596, ...` -> 596).
CREATE OR REPLACE MACRO torch_op_seq(
  -- VARCHAR: an NVTX range's name
  name
)
-- BIGINT: the number after `, seq = `; NULL when the name has none
AS try_cast(regexp_extract(name, ', seq = ([0-9]+)', 1) AS BIGINT);

-- The input shapes of an operator range recorded with record_shapes=True (`..., sizes = [[64, 128], []], ...`).
CREATE OR REPLACE MACRO torch_op_sizes(
  -- VARCHAR: an NVTX range's name
  name
)
-- VARCHAR: the text after `, sizes = ` up to `, input_op_ids = ` or the end (`[[64, 128], []]`); NULL when none
AS nullif(regexp_extract(name, '(?s), sizes = (.*?)(, input_op_ids = .*)?$', 1), '');

-- Whether a range is a PyTorch operator call: `aten::<op>` with or without arguments, or `<namespace>::<op>`
-- with emit_nvtx's arguments (`c10d::allreduce_, op_id = 7`). Not an operator: autograd's own ranges
-- (`torch::autograd::AccumulateGrad`, `autograd::engine::evaluate_function: ...`, two `::` or a space), backward
-- nodes (`AddmmBackward0, seq = 5`, no `::`), record_function scopes (`Optimizer.step#SGD.step, op_id = 3`),
-- DLProf's dict reprs (`{'mod': 'Tensor', ...}`), and user ranges with `::` but no emit_nvtx arguments.
CREATE OR REPLACE MACRO is_torch_op(
  -- VARCHAR: an NVTX range's name
  name
)
-- BOOLEAN
AS regexp_matches(name, '^aten::[A-Za-z0-9_.]+($|, )')
   OR regexp_matches(name, '^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z0-9_.]+, (seq|op_id) = [0-9]');

-- The backward node an autograd engine range runs: `autograd::engine::evaluate_function: AddmmBackward0,
-- op_id = 41` -> `AddmmBackward0`.
CREATE OR REPLACE MACRO torch_evaluated_node(
  -- VARCHAR: an NVTX range's name
  name
)
-- VARCHAR: the node's name; NULL when the range is not autograd's evaluate_function
AS CASE WHEN starts_with(name, 'autograd::engine::evaluate_function: ')
        THEN torch_op_name(substr(name, length('autograd::engine::evaluate_function: ') + 1)) END;

-- Whether a range is a backward node by its name alone: a sequence number, no operator namespace, and a name
-- ending in `Backward` and digits (`AddmmBackward0, seq = 5`; a custom Function's `MyFnBackward, seq = 9`).
-- Nodes named otherwise (`torch::autograd::CopySlices`) are known by the evaluate_function range around them.
CREATE OR REPLACE MACRO is_torch_backward_node(
  -- VARCHAR: an NVTX range's name
  name
)
-- BOOLEAN
AS torch_op_seq(name) IS NOT NULL AND NOT is_torch_op(name)
   AND regexp_matches(torch_op_name(name), 'Backward[0-9]*$');

-- Whether PyTorch opened a range itself under emit_nvtx: an operator call, a backward node, autograd's
-- evaluate_function, or any scope emit_nvtx numbered (`Optimizer.step#SGD.step, op_id = 3`,
-- `torch::autograd::AccumulateGrad, op_id = 88`). Such a range names PyTorch's work on whatever thread runs it,
-- as a library's range does, never the user's phase.
CREATE OR REPLACE MACRO is_torch_range(
  -- VARCHAR: an NVTX range's name
  name
)
-- BOOLEAN
AS contains(name, ', op_id = ') OR contains(name, ', seq = ')
   OR starts_with(name, 'autograd::engine::evaluate_function: ') OR (starts_with(name, 'aten::') AND is_torch_op(name));

-- A range's name with the per-call arguments of a range PyTorch opened itself (is_torch_range) dropped
-- (torch_op_name: `aten::conv2d, seq = 12, op_id = 1479, sizes = [...]` -> `aten::conv2d`), any other name as it
-- is: the name by which two ranges are the same thing where their numbers should not tell them apart.
CREATE OR REPLACE MACRO range_op_name(
  -- VARCHAR: an NVTX range's name
  name
)
-- VARCHAR: the name without PyTorch's arguments
AS CASE WHEN is_torch_range(name) THEN torch_op_name(name) ELSE name END;

-- The name by which NVTX ranges are compared and grouped across instances: a range PyTorch opened itself
-- (is_torch_range) by its name without the per-call arguments (torch_op_name: every call of `aten::conv2d`, whatever
-- its seq, op_id and sizes, is `aten::conv2d`), any other range by its family (family_name: `Batch3` -> `Batch`).
-- The arguments number calls, not steps: two iterations that run the same operators differ in every op_id.
CREATE OR REPLACE MACRO range_family(
  -- VARCHAR: an NVTX range's name
  name
)
-- VARCHAR: the operator's name, or the name's family
AS CASE WHEN is_torch_range(name) THEN torch_op_name(name) ELSE family_name(name) END;

-- How range_family is shown: a PyTorch range as its name without arguments (`aten::conv2d`,
-- `AddmmBackward0`), any other range as family_label (`Batch*`).
CREATE OR REPLACE MACRO range_family_label(
  -- VARCHAR: an NVTX range's name
  name
)
-- VARCHAR: the label
AS CASE WHEN is_torch_range(name) THEN torch_op_name(name) ELSE family_label(name) END;

-- Whether a kernel runs on tensor cores: what the GPU metrics measured where they judge it
-- (kernel_tensor_use.measured, 49_kernel_tensor_use.sql), else what its name says (kernel_classes.tensor_cores).
CREATE OR REPLACE MACRO kernel_tensor_cores(
  -- VARCHAR: kernel_tensor_use.measured (NULL where the metrics do not judge, or the kernel has no row there)
  measured,
  -- VARCHAR: kernel_classes.tensor_cores (NULL where the kernel has no row there)
  by_name
)
-- VARCHAR: yes, no or unknown
AS coalesce(measured, by_name, 'unknown');

-- What a group's kernel_tensor_cores rests on: `name`, `metrics` or `metrics+name` where its kernels were
-- judged both ways. An aggregate.
CREATE OR REPLACE MACRO tensor_cores_evidence(
  -- VARCHAR: kernel_tensor_use.measured of each kernel of the group
  measured
)
-- VARCHAR: the kinds of evidence, sorted, joined by `+`
AS string_agg(DISTINCT CASE WHEN measured IS NULL THEN 'name' ELSE 'metrics' END, '+'
              ORDER BY CASE WHEN measured IS NULL THEN 'name' ELSE 'metrics' END);

-- A CUDA API function's name as nsys prints it: a four-digit version suffix dropped (`cudaLaunchKernel_v7000`
-- -> `cudaLaunchKernel`), longer ones kept (`cudaLaunchKernelExC_v11060`, `cudaGraphLaunch_v10000`).
CREATE OR REPLACE MACRO api_display_name(
  -- VARCHAR: the name as the export stores it
  name
)
-- VARCHAR: the name nsys stats prints
AS CASE WHEN name SIMILAR TO '.*_v[0-9]{4}' THEN name[:-7] ELSE name END;

-- union_stretches of intervals all of one key (below): four streaming passes over BIGINT.
CREATE OR REPLACE MACRO union_stretches_one_key(
  -- TABLE(key BIGINT, start_ns BIGINT, end_ns BIGINT): union_stretches' intervals, every key the same
  intervals
)
-- TABLE(key, start_ns, end_ns, busy_before_ns, prev_end_ns): union_stretches' rows
AS TABLE
WITH sorted AS (
  SELECT key, start_ns, end_ns FROM query_table(intervals) ORDER BY start_ns
), upto AS (  -- upto_end: the latest end among the intervals up to this one
  SELECT key, start_ns, max(end_ns) OVER (ROWS UNBOUNDED PRECEDING) AS upto_end FROM sorted
), around AS (  -- prev_end: the latest end among those before it; the previous and the next interval's start
  SELECT key, start_ns, upto_end, lag(upto_end) OVER () AS prev_end, lag(start_ns) OVER () AS p_start,
         lead(start_ns) OVER () AS n_start
  FROM upto
), edges AS (  -- the intervals that open a stretch (opens), close one (closes), or both. Intervals that start
               -- together may come in any order: the first of them opens the stretch, with the same prev_end.
               -- The order is checked in a CASE, which tests its condition on every row (an OR may skip its
               -- other sides where one holds)
  SELECT * FROM (
    SELECT key, start_ns, upto_end, prev_end, p_start > start_ns AS out_of_order,
           prev_end IS NULL OR start_ns > prev_end AS opens, n_start IS NULL OR n_start > upto_end AS closes
    FROM around)
  WHERE CASE WHEN out_of_order THEN error('union_stretches: DuckDB passed the intervals out of order')
             ELSE opens OR closes END
), stretches AS (  -- at each closing row: its stretch, opened by this row or by the row before
  SELECT key, upto_end AS end_ns, closes,
         CASE WHEN opens THEN start_ns ELSE lag(start_ns) OVER () END AS start_ns,
         CASE WHEN opens THEN prev_end ELSE lag(prev_end) OVER () END AS prev_end_ns
  FROM edges
)
SELECT key, start_ns, end_ns,
       (sum(end_ns - start_ns) OVER (ROWS UNBOUNDED PRECEDING) - (end_ns - start_ns))::BIGINT AS busy_before_ns,
       prev_end_ns
FROM stretches
WHERE closes;

-- union_stretches of intervals of any keys (below): the passes of union_stretches_one_key, the running
-- maximum over HUGEINT with the key in the high 64 bits, and one more for the total at each key's first stretch.
CREATE OR REPLACE MACRO union_stretches_keyed(
  -- TABLE(key BIGINT, start_ns BIGINT, end_ns BIGINT): union_stretches' intervals
  intervals
)
-- TABLE(key, start_ns, end_ns, busy_before_ns, prev_end_ns): union_stretches' rows
AS TABLE
WITH sorted AS (
  SELECT key, start_ns, end_ns FROM query_table(intervals) ORDER BY key, start_ns
), upto AS (  -- m: the latest end among the key's intervals up to this one (in the high bits: the key)
  SELECT key, start_ns, max((key::HUGEINT << 64) + end_ns) OVER (ROWS UNBOUNDED PRECEDING) AS m FROM sorted
), around AS (  -- pm: m of the interval before (of an earlier key at the key's first); the neighbours' places
  SELECT key, start_ns, (m - (key::HUGEINT << 64))::BIGINT AS upto_end, lag(m) OVER () AS pm,
         lag(key) OVER () AS p_key, lag(start_ns) OVER () AS p_start,
         lead(key) OVER () AS n_key, lead(start_ns) OVER () AS n_start
  FROM upto
), edges AS (  -- as in union_stretches_one_key; prev_end: NULL at the key's first interval
  SELECT * FROM (
    SELECT key, start_ns, upto_end, prev_end, p_key > key OR (p_key = key AND p_start > start_ns) AS out_of_order,
           prev_end IS NULL OR start_ns > prev_end AS opens, n_key IS DISTINCT FROM key OR n_start > upto_end AS closes
    FROM (SELECT *, CASE WHEN pm >= (key::HUGEINT << 64) - (1::HUGEINT << 63)
                         THEN (pm - (key::HUGEINT << 64))::BIGINT END AS prev_end
          FROM around))
  WHERE CASE WHEN out_of_order THEN error('union_stretches: DuckDB passed the intervals out of order')
             ELSE opens OR closes END
), stretches AS (
  SELECT key, upto_end AS end_ns, closes,
         CASE WHEN opens THEN start_ns ELSE lag(start_ns) OVER () END AS start_ns,
         CASE WHEN opens THEN prev_end ELSE lag(prev_end) OVER () END AS prev_end_ns
  FROM edges
), summed AS (  -- total: the length of the stretches so far, all keys, this one included
  SELECT key, start_ns, end_ns, prev_end_ns, sum(end_ns - start_ns) OVER (ROWS UNBOUNDED PRECEDING) AS total
  FROM stretches
  WHERE closes
), offset_ AS (  -- key_total: total before the key's first stretch (it only grows: a running maximum finds it)
  SELECT *, max(CASE WHEN prev_end_ns IS NULL THEN total - (end_ns - start_ns) END)
              OVER (ROWS UNBOUNDED PRECEDING) AS key_total
  FROM summed
)
SELECT key, start_ns, end_ns, (total - (end_ns - start_ns) - key_total)::BIGINT AS busy_before_ns, prev_end_ns
FROM offset_;

-- The union of intervals, per key: the stretches in which at least one interval of the key is open, merged
-- where they overlap or touch, each with the length of the key's stretches before it. gpu_busy
-- (80_gpu_busy.sql) is this union of each device's GPU ops; the analyses take it of a subset (the compute or
-- the communication kernels of a device) and measure overlaps by inclusion and exclusion, as Perfetto's
-- intervals/overlap.sql does: |A and B| = |A| + |B| - |A or B|.
-- How (one sort, then passes in that order): the intervals sorted by key and start feed windows with an empty
-- OVER (), which DuckDB computes as one streaming pass each, in the order of their input (DuckDB's
-- order-preservation rules: a window with an empty OVER clause keeps its input's order). Per-key windows would
-- sort once per window and take the running maximum through a segment tree, at more CPU. A running maximum or
-- sum costs a pass of its own; lag and lead come nearly free. An interval opens a stretch when it
-- starts after the latest end before it (lag of the running maximum of the ends), and closes it when the next
-- one starts after the latest end up to it (lead of the start); between the two, lag carries the opening row's
-- start and prev_end to the closing one. Should DuckDB ever hand the passes their input out of order, the
-- query fails (error() below) instead of returning wrong stretches. One key (one device) is the rule:
-- union_stretches_one_key computes it in BIGINT with no per-key offset; several keys take
-- union_stretches_keyed, which keeps each key apart in one pass by carrying it in the high 64 bits of a HUGEINT
-- (a later key's values always compare higher) and takes one more pass for each key's first busy total.
CREATE OR REPLACE MACRO union_stretches(
  -- TABLE(key BIGINT, start_ns BIGINT, end_ns BIGINT): the intervals, none with a NULL key, start or end and
  -- none ending before it starts (is_interval holds for each: a table or CTE name)
  intervals
)
-- TABLE(key, start_ns, end_ns, busy_before_ns, prev_end_ns): one row per stretch; busy_before_ns: the length
-- of the key's stretches before start_ns, so that the covered time inside any window [a, b) is B(b) - B(a),
-- with B(t) = busy_before_ns + clamp(t - start_ns, 0, end_ns - start_ns) of the last stretch starting at or
-- before t (an ASOF join); prev_end_ns: the end of the key's stretch before (NULL for its first)
AS TABLE
WITH keys AS (  -- one: every interval is of the same key (NULL when there is none: both halves below are empty)
  SELECT min(key) = max(key) AS one FROM query_table(intervals)
), one_key AS (
  SELECT i.key, i.start_ns, i.end_ns FROM query_table(intervals) i, keys WHERE keys.one
), some_keys AS (
  SELECT i.key, i.start_ns, i.end_ns FROM query_table(intervals) i, keys WHERE NOT keys.one
)
SELECT * FROM union_stretches_one_key(one_key)
UNION ALL
SELECT * FROM union_stretches_keyed(some_keys);

-- Pairs of a window and a sampling period that overlap, with the length of their overlap: the time-weighted
-- readers of GPU metrics (49_kernel_tensor_use.sql, analyses/iteration_metrics.sql, range_metrics.sql).
-- `windows`: the name of a table or CTE with columns device_id, a, b (a window [a, b), ns) and any others;
-- `periods`: one with device_id, t0, t1 (a period [t0, t1), ns) and any others, none named as a column of
-- `windows` but device_id. Returns the columns of both (device_id once) and overlap_ns.
-- How: an equi-join on (device, bucket), not a range join of every window with every period, which DuckDB
-- runs in time that grows with their product. A bucket is the device's median period; each window and period
-- is listed in every bucket it touches, and a pair that overlaps counts once, in the bucket where its overlap
-- begins (both touch that bucket, since both contain the overlap's start).
CREATE OR REPLACE MACRO overlaps_by_bucket(windows, periods) AS TABLE
WITH p AS (
  SELECT * FROM query_table(periods) WHERE t1 > t0
), width AS (
  SELECT device_id, greatest(1, median(t1 - t0))::BIGINT AS bucket_ns FROM p GROUP BY device_id
), pb AS (
  SELECT p.*, q.bucket_ns, unnest(range(p.t0 // q.bucket_ns, (p.t1 - 1) // q.bucket_ns + 1)) AS bucket
  FROM p JOIN width q USING (device_id)
), wb AS (
  SELECT w.*, unnest(range(w.a // q.bucket_ns, (w.b - 1) // q.bucket_ns + 1)) AS bucket
  FROM query_table(windows) w JOIN width q USING (device_id)
  WHERE w.b > w.a
)
SELECT wb.* EXCLUDE (bucket), pb.* EXCLUDE (device_id, bucket, bucket_ns),
       least(pb.t1, wb.b) - greatest(pb.t0, wb.a) AS overlap_ns
FROM wb JOIN pb ON pb.device_id = wb.device_id AND pb.bucket = wb.bucket
WHERE pb.t0 < wb.b AND pb.t1 > wb.a AND greatest(pb.t0, wb.a) // pb.bucket_ns = pb.bucket;

-- Whether a GPU metric value is a whole number that a double holds exactly (below 2^53): such values are
-- summed as integers by the time-weighted readers (analyses/iteration_metrics.sql, range_metrics.sql), since a
-- sum of doubles beyond 2^53 (clocks in Hz over a long window) takes its last digits from the order the rows
-- come in, which changes from run to run.
CREATE OR REPLACE MACRO is_exact_whole(
  -- DOUBLE: a sample's value
  v
) AS
-- BOOLEAN
v = trunc(v) AND abs(v) < 9007199254740992;

-- The time-weighted mean of a metric over a window, from per-part sums (used in an aggregate: it sums them):
-- from the exact integer sum where every value was whole and the doubles' sum could not hold it (2^53 and
-- beyond), as its whole quotient and the remainder's fraction (each exact or rounded once); else the doubles'
-- sum, exact below 2^53 too.
CREATE OR REPLACE MACRO exact_weighted_mean(
  -- HUGEINT: sum of value x overlap_ns over the whole values (is_exact_whole)
  num_whole,
  -- DOUBLE: sum of value x overlap_ns
  num,
  -- BOOLEAN: whether every value was whole (bool_and of is_exact_whole)
  whole,
  -- BIGINT: sum of overlap_ns
  den
) AS
-- DOUBLE
CASE WHEN bool_and(whole) AND abs(sum(num_whole)) >= 9007199254740992
     THEN (sum(num_whole) // sum(den))::DOUBLE + (sum(num_whole) % sum(den))::DOUBLE / sum(den)
     ELSE sum(num) / sum(den) END;

-- Per window and metric, the sums a time-weighted mean is made of (exact_weighted_mean): value x overlap over
-- the samples of the periods each window overlaps, exactly where the values are whole (is_exact_whole: nsys
-- writes INTEGER); the samples summed per metric (gpu_metric_names.key), the names joined to the sums by the
-- caller. `pairs`: a table or CTE of windows against periods (overlaps_by_bucket: device_id, t0, overlap_ns and
-- the window's key columns); `metrics`: one with the device_id of the metrics read (the windows of other devices
-- are left out; every metric of a device is summed, the caller's join with the names keeps those it reads: a
-- test of each sample's key cost more); `samples`: gpu_metric_values (key,
-- timestamp_ns, value: `key >> 23` is its device). Returns the window's key columns, device_id, key, num_whole,
-- num, whole, den.
CREATE OR REPLACE MACRO metric_sums_by_window(pairs, metrics, samples) AS TABLE
SELECT o.* EXCLUDE (t0, overlap_ns), v.key,
       sum(CASE WHEN is_exact_whole(v.value) THEN v.value::BIGINT::HUGEINT * o.overlap_ns END) AS num_whole,
       sum(v.value * o.overlap_ns) AS num,
       bool_and(is_exact_whole(v.value)) AS whole,
       sum(o.overlap_ns) AS den
FROM (SELECT * FROM query_table(pairs) WHERE device_id IN (SELECT device_id FROM query_table(metrics))) o
JOIN query_table(samples) v ON v.timestamp_ns = o.t0 AND v.key >> 23 = o.device_id
GROUP BY ALL;

-- When a GPU op was launched, as the CPU's timeline places it: the start of the API call that launched it, or
-- the op's own start when no call was traced (op_launch holds no row for the op: api_start_ns is NULL).
CREATE OR REPLACE MACRO op_launch_ns(
  -- BIGINT: op_launch.api_start_ns
  api_start_ns,
  -- BIGINT: gpu_ops.start_ns
  start_ns
)
-- BIGINT: ns
AS coalesce(api_start_ns, start_ns);

-- Which iteration a GPU op belongs to: the one in which it was launched (op_launch_ns), whichever thread of the
-- process launched it (PyTorch's autograd thread launches the backward pass). An op launched at an iteration's
-- start belongs to it; one launched at its end, to the next (or to none).
-- How: each window holds the instants from its start to its end or the next window's start, whichever comes
-- first (the latest window starting at or before an op's launch is the one that may hold it); the ops meet the
-- windows in an equi-join on a time bucket (width: the windows' median length, or more where that would make
-- more than about 4 buckets a window), each window listed in every bucket it touches. That streams the ops
-- through a hash table of the few windows, where an ASOF join sorts every op each time it is asked. A bucket that
-- more than 8 windows touch (many tiny windows together) would make each op in it meet them all: its ops take
-- the ASOF join instead, so that time stays linear in ops and windows whatever their lengths.
CREATE OR REPLACE MACRO ops_by_iteration(
  -- the name of a table or CTE of gpu_ops rows with their api_start_ns (op_launch): any columns that hold
  -- api_start_ns and start_ns
  ops,
  -- the name of a table of iteration windows (columns iteration, start_ns, end_ns: analyses/iteration_windows.sql,
  -- held by nsysql.analyses.iterations.Windows), disjoint
  windows
)
-- TABLE(iteration, the columns of ops..., launch_ns): one row per op launched inside a window; launch_ns: the
-- instant that placed it
AS TABLE
WITH win AS (  -- what each window holds: [start_ns, end_ns), disjoint, none empty
  SELECT * FROM (
    SELECT iteration, start_ns,
           least(end_ns, coalesce(lead(start_ns) OVER (ORDER BY start_ns, end_ns), end_ns)) AS end_ns
    FROM query_table(windows))
  WHERE end_ns > start_ns
), width AS (
  SELECT greatest(median(end_ns - start_ns)::BIGINT, ((max(end_ns) - min(start_ns)) // (4 * count(*) + 1))::BIGINT,
                  1) AS b
  FROM win
), listed AS (  -- each window in every bucket it touches
  SELECT w.*, unnest(range(w.start_ns // b, (w.end_ns - 1) // b + 1)) AS bucket FROM win w, width
), crowded AS (
  SELECT bucket FROM listed GROUP BY bucket HAVING count(*) > 8
)
SELECT i.iteration, o.* EXCLUDE (bucket)
FROM (SELECT *, op_launch_ns(api_start_ns, start_ns) AS launch_ns, launch_ns // (SELECT b FROM width) AS bucket
      FROM query_table(ops)) o
JOIN (SELECT * FROM listed WHERE bucket NOT IN (SELECT bucket FROM crowded)) i
  ON o.bucket = i.bucket AND o.launch_ns >= i.start_ns AND o.launch_ns < i.end_ns
UNION ALL
SELECT i.iteration, o.* EXCLUDE (bucket)
FROM (SELECT * FROM (SELECT *, op_launch_ns(api_start_ns, start_ns) AS launch_ns,
                            launch_ns // (SELECT b FROM width) AS bucket
                     FROM query_table(ops))
      WHERE bucket IN (SELECT bucket FROM crowded)) o
ASOF JOIN win i ON o.launch_ns >= i.start_ns
WHERE o.launch_ns < i.end_ns;

COMMIT;
