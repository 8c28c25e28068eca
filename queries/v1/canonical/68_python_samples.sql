-- @include 55_nvtx_payloads.sql
-- @tables nvtx_payload_fields, nvtx_payloads
-- @defines python_frames, python_samples

-- nsysql canonical schema v1: Python call stacks sampled by nsys (`nsys profile --python-sampling=true`), read
-- from the payloads of the NVTX marks of the domain `Python Periodic Sampling` (nvtx_payloads, decoded by the
-- export's schema: a thread state, a frame count, then the frames, innermost first, each a function, a file and a
-- line). Empty unless the report was exported with `nsys export --type sqlite --include-blobs=true`. nsys writes
-- the names HTML-escaped (`&lt;module&gt;`); they are given unescaped (`<module>`). Views: computed when asked,
-- so loading pays nothing for them.

-- One row per Python sample of a thread.
CREATE OR REPLACE VIEW python_samples AS
WITH py AS (
  SELECT event_id, pid, tid, start_ns FROM nvtx_payloads
  WHERE domain = 'Python Periodic Sampling' AND event = 'mark' AND decoded
)
SELECT
  -- nvtx_payloads.event_id of the sample's mark (python_frames.sample_id)
  p.event_id AS sample_id,
  -- process id
  p.pid,
  -- thread id (the sampled thread)
  p.tid,
  -- when the sample was taken, ns
  p.start_ns AS ts_ns,
  -- the thread's state as nsys recorded it (`Running`, `Uninterruptible`, ...)
  any_value(f.value) FILTER (WHERE f.field = 'Thread state') AS state,
  -- the number of frames of its stack
  any_value(f.int_value) FILTER (WHERE f.field = 'Frames count') AS frames
FROM py p
LEFT JOIN nvtx_payload_fields f ON f.event_id = p.event_id AND f.field IN ('Thread state', 'Frames count')
GROUP BY p.event_id, p.pid, p.tid, p.start_ns;

-- One row per frame of each Python sample.
CREATE OR REPLACE VIEW python_frames AS
WITH fr AS (
  SELECT f.event_id, f.element,
         any_value(f.value) FILTER (WHERE f.field = 'Frames.Function') AS function,
         any_value(f.value) FILTER (WHERE f.field = 'Frames.File') AS file,
         any_value(f.int_value) FILTER (WHERE f.field = 'Frames.Line') AS line
  FROM nvtx_payload_fields f
  SEMI JOIN nvtx_payloads p ON p.event_id = f.event_id AND p.domain = 'Python Periodic Sampling' AND p.event = 'mark'
  WHERE f.field IN ('Frames.Function', 'Frames.File', 'Frames.Line') AND f.element IS NOT NULL
  GROUP BY f.event_id, f.element
)
SELECT
  -- python_samples.sample_id
  event_id AS sample_id,
  -- position in the stack: 0 is the innermost frame (the function running), larger is further out
  element AS depth,
  -- function name, e.g. `_get_data`, `<module>`
  replace(replace(replace(replace(replace(function, '&lt;', '<'), '&gt;', '>'), '&quot;', '"'), '&#39;', ''''),
          '&amp;', '&') AS function,
  -- source file
  replace(replace(replace(replace(replace(file, '&lt;', '<'), '&gt;', '>'), '&quot;', '"'), '&#39;', ''''),
          '&amp;', '&') AS file,
  -- line in that file
  line
FROM fr;
