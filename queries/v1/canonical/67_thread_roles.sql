-- @include 10_processes_threads.sql, 30_api_calls.sql, 42_op_launch.sql, 65_cpu_samples.sql, 66_cpu_threads.sql, 90_process_roles.sql
-- @tables api_calls, cpu_samples, op_launch, process_parents, process_roles, thread_states, threads
-- @defines thread_roles

-- nsysql canonical schema v1: the role of each thread in the job. A view: computed when asked (by the CPU
-- analyses), so loading pays nothing for it.

-- One row per thread seen (named, sampled, scheduled, or that made a CUDA call: a thread nsys never named, sampled
-- nor scheduled may still have launched the GPU work), with its role in the job. The first rule that holds:
--   profiler            nsys's and CUPTI's own threads (`[NSys]`, `[NSys Comms]`, `NSys PySampling`, `CUPTI
--                       worker thread`)
--   main                the main thread of a process with GPU work (process_roles.main_tid: its NVTX ranges hold
--                       the most GPU work, else it launched the most); iterations and gap causes are read there.
--                       A DataLoader worker process (below) that launched GPU work has a main thread too, but it
--                       runs the worker's loop, not the job's: it is `main` only where its process owns a GPU
--                       (the most GPU ops of the processes whose main device it is: gaps are read on that
--                       process's main thread), else `data_loader`, as its other threads are
--   autograd            PyTorch's backward threads (`pt_autograd_<device>`)
--   data_loader         threads of a PyTorch DataLoader worker process: the process's own thread (tid = pid), or
--                       the thread itself, is named `pt_data_worker` (PyTorch names the worker loop's thread so);
--                       by the process's thread only where that process owns no GPU: one that owns a GPU is the
--                       job's (its main thread stays `main`), and its other threads (CUDA's, NCCL's) are not
--                       a worker's
--   nccl                NCCL's threads (names starting `NCCL` or `nccl`: proxy, service, watchdog threads)
--   cuda_event_handler  the CUDA driver's `cuda-EvtHandlr`
--   launcher            another thread that launched GPU work
--   child_process       a thread of a process forked by a process with GPU work (parent_pid), none of the above
--   other               the rest
CREATE OR REPLACE VIEW thread_roles AS
WITH launchers AS (
  SELECT DISTINCT api_pid AS pid, api_tid AS tid FROM op_launch WHERE api_tid IS NOT NULL
), known AS (
  SELECT pid, tid FROM threads
  UNION SELECT DISTINCT pid, tid FROM cpu_samples
  UNION SELECT DISTINCT pid, tid FROM thread_states WHERE source = 'sched'
  UNION SELECT DISTINCT pid, tid FROM api_calls WHERE tid IS NOT NULL
  UNION SELECT pid, main_tid FROM process_roles WHERE main_tid IS NOT NULL
  UNION SELECT pid, tid FROM launchers
), owners AS (  -- the processes that own a GPU (gaps.py: the most GPU ops of those whose main device it is)
  SELECT pid FROM process_roles QUALIFY ops = max(ops) OVER (PARTITION BY device_id)
), named AS (
  SELECT k.pid, k.tid, t.name, m.name AS process_thread_name, p.parent_pid,
         coalesce(t.name = 'pt_data_worker' OR (m.name = 'pt_data_worker' AND o.pid IS NULL), false) AS in_worker,
         r.main_tid IS NOT NULL AS is_main, o.pid IS NOT NULL AS owns_gpu, l.tid IS NOT NULL AS launched,
         pp.pid IS NOT NULL AS parent_has_gpu
  FROM known k
  LEFT JOIN threads t ON t.pid = k.pid AND t.tid = k.tid
  LEFT JOIN threads m ON m.pid = k.pid AND m.tid = k.pid
  LEFT JOIN process_parents p ON p.pid = k.pid
  LEFT JOIN process_roles r ON r.pid = k.pid AND r.main_tid = k.tid
  LEFT JOIN owners o ON o.pid = k.pid
  LEFT JOIN launchers l ON l.pid = k.pid AND l.tid = k.tid
  LEFT JOIN (SELECT DISTINCT pid FROM process_roles) pp ON pp.pid = p.parent_pid
)
SELECT
  -- process id
  pid,
  -- thread id
  tid,
  -- thread name (threads.name), NULL where nsys recorded none
  name,
  -- profiler, main, autograd, data_loader, nccl, cuda_event_handler, launcher, child_process or other (the rules above it in 67_thread_roles.sql)
  CASE
    WHEN regexp_matches(coalesce(name, ''), '^(\[NSys|NSys |CUPTI worker|\*[0-9])') THEN 'profiler'
    WHEN is_main AND (owns_gpu OR NOT in_worker) THEN 'main'
    WHEN starts_with(coalesce(name, ''), 'pt_autograd') THEN 'autograd'
    WHEN in_worker THEN 'data_loader'
    WHEN regexp_matches(coalesce(name, ''), '^(NCCL|nccl)') THEN 'nccl'
    WHEN name = 'cuda-EvtHandlr' THEN 'cuda_event_handler'
    WHEN launched THEN 'launcher'
    WHEN parent_has_gpu THEN 'child_process'
    ELSE 'other'
  END AS role,
  -- the process that forked this thread's process (a fork call of it in flight when the process was first
  -- seen), NULL when none was traced
  parent_pid
FROM named
ORDER BY pid, tid;
