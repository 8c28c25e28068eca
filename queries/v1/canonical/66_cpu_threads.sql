-- @include 00_macros.sql, 05_strings.sql, 30_api_calls.sql, 65_cpu_samples.sql
-- @staging raw_nvtx, raw_runtime, raw_sched
-- @tables cpu_samples, os_calls, strings
-- @macros global_pid, global_tid
-- @defines os_call_waits, process_parents, thread_states
-- @empty_without os_calls, raw_sched

-- nsysql canonical schema v1: what each thread was doing over time (on a CPU, off it, blocked in an OS call),
-- and which process forked which. Independent of the GPU tables, so it runs beside them while loading.

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
  FROM os_calls o
  -- each call name judged once, not once per call
  SEMI JOIN (SELECT s.id FROM (SELECT DISTINCT name_id FROM os_calls) n JOIN strings s ON s.id = n.name_id
             WHERE os_call_waits(s.value)) w ON w.id = o.name_id
  WHERE o.nesting_level = 0
)
ORDER BY pid, tid, start_ns;

-- The fork calls (fork, vfork, clone, clone3): a process first seen inside another's is its child.
CREATE OR REPLACE TEMP TABLE _forks AS
SELECT o.pid, o.start_ns, o.end_ns
FROM os_calls o JOIN strings s ON s.id = o.name_id AND s.value IN ('fork', 'vfork', 'clone', 'clone3', '__libc_fork');

-- The first traced instant of each process: when it existed for nsys. Only where some fork was traced: with
-- none there is no parent to find, and the cross join with the empty `any_fork` makes DuckDB skip the scans of
-- every runtime call and NVTX event.
CREATE OR REPLACE TEMP TABLE _first_seen AS
SELECT pid, min(ts) AS ts FROM (
  SELECT pid, start_ns AS ts FROM os_calls
  UNION ALL SELECT pid, ts_ns FROM cpu_samples
  UNION ALL SELECT global_pid(globalTid), start FROM raw_sched
  UNION ALL SELECT global_pid(globalTid), start FROM raw_runtime
  UNION ALL SELECT global_pid(globalTid), start FROM raw_nvtx
), (SELECT DISTINCT true AS any_fork FROM _forks)
WHERE pid IS NOT NULL AND ts IS NOT NULL GROUP BY pid;

-- One row per process whose parent is known: the other process that was inside a fork (fork, vfork, clone, clone3) when the process
-- was first seen. nsys records no parent pid; a child forked without exec (DataLoader workers with the `fork`
-- start method, under `--trace-fork-before-exec=true`) starts while its parent's fork call is in flight.
CREATE OR REPLACE TABLE process_parents AS
SELECT
  -- process id
  f.pid,
  -- the process that was inside a fork when this one was first seen
  min(o.pid) AS parent_pid
FROM _first_seen f
JOIN _forks o ON o.pid <> f.pid AND o.start_ns <= f.ts AND o.end_ns >= f.ts
GROUP BY f.pid
HAVING count(DISTINCT o.pid) = 1;
