-- @include 00_macros.sql, 05_strings.sql, 10_processes_threads.sql, 30_api_calls.sql, 40_gpu_ops.sql, 65_cpu_samples.sql
-- @include 90_process_roles.sql
-- @staging raw_nvtx, raw_runtime, raw_sched
-- @tables cpu_samples, gpu_ops, os_calls, process_roles, strings, threads
-- @macros global_pid, global_tid
-- @defines os_call_waits, thread_roles, thread_states

-- nsysql canonical schema v1: what each thread was doing over time (on a CPU, off it, blocked in an OS call)
-- and the role of each thread in the job.

-- Whether an OS runtime call blocks until another thread, process, timer or file descriptor is ready: poll and
-- select, futex, condition variables, joins, locks, semaphores, sleeps, accept, receives and reads (a blocking
-- read of a pipe or socket cannot be told from a file read by name, and both wait for someone else), waits for
-- children or signals. The same list as gap_activity.sql's `waiting`.
CREATE OR REPLACE MACRO os_call_waits(
  -- VARCHAR: the OS call's name (os_calls.name_id's string)
  name
)
-- BOOLEAN
AS regexp_matches(name, '^(e?poll|ppoll|p?select|epoll_p?wait|futex|pthread_cond_(timed|clock)?wait'
                        || '|pthread_join|pthread_(mutex|rwlock)_(timed|clock)?(rd|wr)?lock'
                        || '|sem_(timed|clock)?wait|(clock_)?nanosleep|u?sleep|accept4?'
                        || '|recv(from|msg|mmsg)?|p?readv?|pread64|wait(pid|id|4)?|sigwait.*|msgrcv)$');

CREATE OR REPLACE TEMP TABLE _sched AS
SELECT global_pid(globalTid) AS pid, global_tid(globalTid) AS tid, start AS ts_ns, isSchedIn <> 0 AS sched_in,
       lead(start) OVER w AS next_ns, lead(isSchedIn <> 0) OVER w AS next_in
FROM raw_sched
WHERE start IS NOT NULL AND isSchedIn IS NOT NULL AND globalTid IS NOT NULL
WINDOW w AS (PARTITION BY globalTid ORDER BY start, isSchedIn);

-- Intervals of a thread's state. Two sources, each without overlaps on a thread, that overlap each other (a
-- thread blocked in `poll` is off the CPU, with short runs on it):
--   sched  scheduling events (`--cpuctxsw=process-tree`, nsys's SCHED_EVENTS): `running` from the thread being
--          put on a CPU to being taken off it, `off_cpu` from being taken off to being put on again. Before a
--          thread's first event and after its last the state is unknown (no row); two events of the same kind
--          in a row (a lost event) leave the time between them out.
--   osrt   OS runtime calls that block (os_call_waits; `-t osrt`, outermost calls only): `blocked`, in which call.
CREATE OR REPLACE TABLE thread_states AS
SELECT
  -- process id
  pid,
  -- thread id
  tid,
  -- interval start, ns
  start_ns,
  -- interval end, ns
  end_ns,
  -- `running` or `off_cpu` (source sched: scheduling events), or `blocked` (source osrt: in a blocking OS call)
  state,
  -- `sched` or `osrt`
  source,
  -- strings.id of the OS call a `blocked` interval is spent in (pthread_cond_timedwait, poll, ...); NULL otherwise
  call_id
FROM (
  SELECT pid, tid, ts_ns AS start_ns, next_ns AS end_ns, CASE WHEN sched_in THEN 'running' ELSE 'off_cpu' END AS state,
         'sched' AS source, NULL::BIGINT AS call_id
  FROM _sched WHERE next_in IS NOT NULL AND next_in <> sched_in AND next_ns >= ts_ns
  UNION ALL
  SELECT o.pid, o.tid, o.start_ns, o.end_ns, 'blocked', 'osrt', o.name_id
  FROM os_calls o JOIN strings s ON s.id = o.name_id
  WHERE o.nesting_level = 0 AND os_call_waits(s.value)
)
ORDER BY pid, tid, start_ns;

-- The first traced instant of each process: when it existed for nsys.
CREATE OR REPLACE TEMP TABLE _first_seen AS
SELECT pid, min(ts) AS ts FROM (
  SELECT pid, min(start_ns) AS ts FROM os_calls GROUP BY pid
  UNION ALL SELECT pid, min(ts_ns) FROM cpu_samples GROUP BY pid
  UNION ALL SELECT global_pid(globalTid), min(start) FROM raw_sched GROUP BY 1
  UNION ALL SELECT global_pid(globalTid), min(start) FROM raw_runtime GROUP BY 1
  UNION ALL SELECT global_pid(globalTid), min(start) FROM raw_nvtx GROUP BY 1
) WHERE pid IS NOT NULL AND ts IS NOT NULL GROUP BY pid;

-- A process's parent: the other process that was inside a fork (fork, vfork, clone, clone3) when the process
-- was first seen. nsys records no parent pid; a child forked without exec (DataLoader workers with the `fork`
-- start method, under `--trace-fork-before-exec=true`) starts while its parent's fork call is in flight.
CREATE OR REPLACE TEMP TABLE _parent AS
SELECT f.pid, min(o.pid) AS parent_pid
FROM _first_seen f
JOIN os_calls o ON o.pid <> f.pid AND o.start_ns <= f.ts AND o.end_ns >= f.ts
JOIN strings s ON s.id = o.name_id AND s.value IN ('fork', 'vfork', 'clone', 'clone3', '__libc_fork')
GROUP BY f.pid
HAVING count(DISTINCT o.pid) = 1;

CREATE OR REPLACE TEMP TABLE _known AS
SELECT pid, tid FROM threads
UNION SELECT DISTINCT pid, tid FROM cpu_samples
UNION SELECT DISTINCT pid, tid FROM thread_states WHERE source = 'sched';

CREATE OR REPLACE TEMP TABLE _launchers AS
SELECT DISTINCT pid, api_tid AS tid FROM gpu_ops WHERE api_tid IS NOT NULL;

-- One row per thread seen (named, sampled or scheduled), with its role in the job. The first rule that holds:
--   profiler            nsys's and CUPTI's own threads (`[NSys]`, `[NSys Comms]`, `NSys PySampling`, `CUPTI
--                       worker thread`)
--   main                the main thread of a process with GPU work (process_roles.main_tid: its NVTX ranges hold
--                       the most GPU work, else it launched the most); iterations and gap causes are read there
--   autograd            PyTorch's backward threads (`pt_autograd_<device>`)
--   data_loader         threads of a PyTorch DataLoader worker process: the process's own thread (tid = pid), or
--                       the thread itself, is named `pt_data_worker` (PyTorch names its workers so)
--   nccl                NCCL's threads (names starting `NCCL` or `nccl`: proxy, service, watchdog threads)
--   cuda_event_handler  the CUDA driver's `cuda-EvtHandlr`
--   launcher            another thread that launched GPU work
--   child_process       a thread of a process forked by a process with GPU work (parent_pid), none of the above
--   other               the rest
CREATE OR REPLACE TABLE thread_roles AS
WITH named AS (
  SELECT k.pid, k.tid, t.name, m.name AS process_thread_name, p.parent_pid,
         r.main_tid IS NOT NULL AS is_main, l.tid IS NOT NULL AS launched,
         pp.pid IS NOT NULL AS parent_has_gpu
  FROM _known k
  LEFT JOIN threads t ON t.pid = k.pid AND t.tid = k.tid
  LEFT JOIN threads m ON m.pid = k.pid AND m.tid = k.pid
  LEFT JOIN _parent p ON p.pid = k.pid
  LEFT JOIN process_roles r ON r.pid = k.pid AND r.main_tid = k.tid
  LEFT JOIN _launchers l ON l.pid = k.pid AND l.tid = k.tid
  LEFT JOIN (SELECT DISTINCT pid FROM process_roles) pp ON pp.pid = p.parent_pid
)
SELECT
  -- process id
  pid,
  -- thread id
  tid,
  -- thread name (threads.name), NULL where nsys recorded none
  name,
  -- profiler, main, autograd, data_loader, nccl, cuda_event_handler, launcher, child_process or other (the rules above it in 66_cpu_threads.sql)
  CASE
    WHEN regexp_matches(coalesce(name, ''), '^(\[NSys|NSys |CUPTI worker|\*[0-9])') THEN 'profiler'
    WHEN is_main THEN 'main'
    WHEN starts_with(coalesce(name, ''), 'pt_autograd') THEN 'autograd'
    WHEN name = 'pt_data_worker' OR process_thread_name = 'pt_data_worker' THEN 'data_loader'
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
