-- @include 05_strings.sql, 40_gpu_ops.sql, 42_op_launch.sql
-- @tables gpu_ops, op_launch, strings
-- @defines gpu_ops_named

-- nsysql canonical schema v1: the GPU ops as a user reads them, every id spelled out.

-- gpu_ops with its launch and its names spelled out: every gpu_ops column, the op_launch columns (NULL where no
-- call was traced), then name, short_name, mangled_name, api_name.
CREATE OR REPLACE VIEW gpu_ops_named AS
SELECT
  -- every column of gpu_ops (op_id, kind, start_ns, ... as documented there)
  o.*,
  -- op_launch's columns: api_call_id, api_tid, api_start_ns, api_end_ns, api_name_id (as documented there)
  l.* EXCLUDE (op_id, api_pid),
  -- the text of name_id: the demangled kernel name, or `[CUDA memcpy Host-to-Device]`, `[CUDA memset]`, ...
  n.value AS name,
  -- the text of short_name_id: the kernel's short (base) name
  sn.value AS short_name,
  -- the text of mangled_name_id
  mn.value AS mangled_name,
  -- the text of api_name_id: the launching call, e.g. `cudaLaunchKernel_v7000`
  an.value AS api_name
FROM gpu_ops o
LEFT JOIN op_launch l ON l.op_id = o.op_id
LEFT JOIN strings n ON n.id = o.name_id
LEFT JOIN strings sn ON sn.id = o.short_name_id
LEFT JOIN strings mn ON mn.id = o.mangled_name_id
LEFT JOIN strings an ON an.id = l.api_name_id;
