-- @include 00_macros.sql
-- @staging raw_callchains, raw_samples
-- @macros global_pid, global_tid
-- @defines cpu_samples, cpu_stack_frames
-- @empty_without raw_callchains, raw_samples

-- nsysql canonical schema v1: CPU samples and their call stacks (`nsys profile -s process-tree`, nsys's
-- COMPOSITE_EVENTS and SAMPLING_CALLCHAINS). Empty when the export has no CPU samples.
-- A stack is stored once however many samples share it: identical lists of (frame, module), leaf first, get
-- one stack_id.

CREATE OR REPLACE TEMP TABLE _chains AS
SELECT id, list({'f': symbol, 'm': module, 'k': coalesce(kernelMode, 0) <> 0} ORDER BY stackDepth) AS frames
FROM raw_callchains
GROUP BY id;

CREATE OR REPLACE TEMP TABLE _stacks AS
SELECT frames, row_number() OVER (ORDER BY frames) AS stack_id
FROM (SELECT DISTINCT frames FROM _chains);

-- One row per CPU sample of a thread.
CREATE OR REPLACE TABLE cpu_samples AS
SELECT
  -- the sample's id in the export (COMPOSITE_EVENTS.id)
  s.id AS sample_id,
  -- process id
  global_pid(s.globalTid) AS pid,
  -- thread id
  global_tid(s.globalTid) AS tid,
  -- when the sample was taken, ns on the export's clock
  s.start AS ts_ns,
  -- the CPU the thread was running on
  s.cpu,
  -- cpu_stack_frames.stack_id of its call stack; NULL when the export holds no frames for it
  k.stack_id,
  -- strings.id of the leaf frame's function (where the thread was executing), NULL without a stack
  c.frames[1].f AS leaf_frame_id,
  -- strings.id of the module (binary or shared library) of the leaf frame
  c.frames[1].m AS leaf_module_id,
  -- whether the leaf frame is in the kernel (a system call or interrupt in progress)
  c.frames[1].k AS leaf_kernel_mode
FROM raw_samples s
LEFT JOIN _chains c ON c.id = s.id
LEFT JOIN _stacks k ON k.frames = c.frames
WHERE s.start IS NOT NULL;

-- One row per frame of each distinct call stack of cpu_samples.
CREATE OR REPLACE TABLE cpu_stack_frames AS
SELECT
  -- the stack (cpu_samples.stack_id)
  stack_id,
  -- position in the stack: 0 is the leaf (the function executing), larger is further out toward main
  (i - 1)::BIGINT AS depth,
  -- strings.id of the function's name (demangled; an address such as `0x7f55e71a19d2` where nsys could not
  -- resolve it)
  frames[i].f AS frame_id,
  -- strings.id of the module (binary or shared library) the function is in
  frames[i].m AS module_id,
  -- whether the frame is kernel code
  frames[i].k AS kernel_mode
FROM (SELECT stack_id, frames, unnest(range(1, len(frames) + 1)) AS i FROM _stacks);
