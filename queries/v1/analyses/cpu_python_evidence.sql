-- @tables api_calls, cpu_samples, cpu_stack_frames, nvtx_marks, nvtx_ranges, os_calls, process_roles, processes, strings, thread_roles

-- What shows that the profiled program is Python, most telling first: nsys's Python sampler thread (`NSys
-- PySampling`), a process or thread named as a Python interpreter (`python3`, `python3.12`) or as PyTorch's
-- Python side names its threads (`pt_main_thread`, a DataLoader's `pt_data_worker`), a Python interpreter or
-- library among the sampled modules. Only the processes nsys traced count (their CPU samples, CUDA or OS calls,
-- NVTX, GPU work): an export's process and thread names cover the whole machine, whose other programs say
-- nothing of this one. No row: nothing shows it.
WITH traced AS (
  SELECT DISTINCT pid FROM cpu_samples
  UNION SELECT DISTINCT pid FROM api_calls
  UNION SELECT DISTINCT pid FROM os_calls
  UNION SELECT DISTINCT pid FROM nvtx_ranges
  UNION SELECT DISTINCT pid FROM nvtx_marks
  UNION SELECT pid FROM process_roles
), hits AS (
  SELECT 1 AS ord, 'thread' AS kind, r.name, r.pid FROM thread_roles r SEMI JOIN traced USING (pid)
  WHERE r.name = 'NSys PySampling'
  UNION ALL
  SELECT 2, 'process', p.name, p.pid FROM processes p SEMI JOIN traced USING (pid)
  WHERE regexp_matches(p.name, '(^|[/\\])python[0-9.]*(\.exe)?$', 'i') OR p.name IN ('pt_main_thread', 'pt_data_worker')
  UNION ALL
  SELECT 3, 'thread', r.name, r.pid FROM thread_roles r SEMI JOIN traced USING (pid)
  WHERE regexp_matches(r.name, '^python[0-9.]*$', 'i') OR r.name IN ('pt_main_thread', 'pt_data_worker')
  UNION ALL
  SELECT 4, 'module', s.value, NULL FROM (SELECT DISTINCT module_id FROM cpu_stack_frames) m
  JOIN strings s ON s.id = m.module_id
  WHERE regexp_matches(s.value, '(^|[/\\])(lib)?python[0-9.]*[dmu]*(\.so[0-9.]*|\.dll|\.exe|\.dylib)?$', 'i')
)
SELECT kind, name, pid FROM hits ORDER BY ord, name, pid NULLS LAST LIMIT 1;
