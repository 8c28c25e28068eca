-- @tables api_calls, devices, nvtx_open, nvtx_ranges, os_calls, processes, strings, threads
-- @macros range_op_name
-- @param $cuda BOOLEAN: read CUDA API calls too (they are most of a large export's events)
-- @param $devices INTEGER[]: each gap's device
-- @param $ends BIGINT[]: each gap's end, ns
-- @param $gap_ids BIGINT[]: the gaps' ids (parallel lists with $starts ... $devices)
-- @param $pids BIGINT[]: each gap's process (the owner of its device)
-- @param $skip_pid BIGINT: process of the thread that waits in every gap, -1 for none
-- @param $skip_tid BIGINT: that thread, -1 for none
-- @param $starts BIGINT[]: each gap's start, ns
-- @param $tids BIGINT[]: each gap's thread (that process's main thread)

-- What the other threads and processes of the profile were doing during GPU idle gaps: one row per gap and
-- activity, with the time the activity overlaps the gap.
-- $gap_ids, $starts, $ends, $pids, $tids, $devices: the gaps (parallel lists), each with its device and the
-- process and thread whose wait it is (the device owner's main thread: the one gaps.sql reads the cause on).
-- That thread's own activity is the gap's cause already and is left out here; every other thread of every
-- process counts. $skip_pid, $skip_tid: the thread that waits in every gap (-1: none), left out before any join.
--
-- The same job: every process of the export. nsys traces the process it starts and its children, each with its
-- own pid: those started with fork+exec (multiprocessing's `spawn`, subprocess) by default, those that fork
-- without exec (multiprocessing's `fork`) only with `nsys profile --trace-fork-before-exec=true`; an untraced
-- child's work is not in the export and cannot be named. Processes the export merely names (the system's other
-- processes in its process list) have no traced events, so no activity.
--
-- Activity, each source counted on its own (a range and an OS call inside it are two rows, not one):
--   nvtx  push/pop ranges of any domain: only the innermost range open on a thread counts (nvtx_open), so
--         nested ranges are never counted twice (an outer `Batch` range counts only where no inner range is
--         open); start/end ranges (not nested per thread) each count their own overlap
--   os    OS runtime calls (-t osrt) at nesting level 0 (a call made inside another traced call is part of it)
--   cuda  CUDA runtime/driver API calls (when $cuda: they are most of a large export's events, and summary's
--         one line leaves them out to stay cheap)
-- Time on a CPU (scheduling events) and CPU samples are not read here: nsysql.analyses.cpu.gap_rows adds them
-- beside these rows (kind `cpu`).
--
-- Waiting, not work (`waiting` = true): OS calls that block until another thread, process, timer or file
-- descriptor is ready (poll/select/epoll, futex, pthread_cond_*wait, pthread_join, mutex and rwlock locks,
-- sem_*wait, sleeps, accept, recv*, read*, wait*: a blocking read of a pipe or socket cannot be told apart from
-- a file read by name, and both wait for someone else), and CUDA calls that wait for the GPU (*Synchronize*,
-- *WaitEvent*, *EventQuery*, *StreamQuery*: the sync kind of gaps.sql). They are reported, ranked after all
-- work, and never named as what the idle time waited on. Every other call, and every NVTX range, is work.
--
-- Overlap: least(activity end, gap end) - greatest(activity start, gap start), summed per gap, thread and
-- activity (kind, domain, name; a range PyTorch opened is named without its per-call arguments, range_op_name,
-- so the calls of one operator are one activity), capped at the gap's length (a thread does one thing of a kind
-- at a time).
WITH g AS (
  SELECT unnest($gap_ids) AS gap_id, unnest($starts) AS start_ns, unnest($ends) AS end_ns,
         unnest($pids) AS gpid, unnest($tids) AS gtid, unnest($devices) AS dev
), gs AS (  -- the gaps in time order per device (one device's gaps never overlap)
  SELECT *, row_number() OVER (PARTITION BY dev ORDER BY start_ns) AS ord FROM g
), devs AS (
  SELECT DISTINCT dev FROM g
), bounds AS (
  SELECT min(start_ns) AS lo, max(end_ns) AS hi FROM g
), segs AS (  -- the innermost push/pop range of a thread from ts_ns until the thread's next change
  SELECT pid, tid, ts_ns AS start_ns, lead(ts_ns) OVER (PARTITION BY pid, tid ORDER BY ts_ns) AS end_ns, range_id
  FROM nvtx_open
), acts AS (  -- name_id for calls (named once per name at the end), range_id for ranges
  SELECT pid, tid, start_ns, end_ns, 0 AS kind, range_id AS id FROM segs WHERE end_ns IS NOT NULL AND range_id IS NOT NULL
  UNION ALL
  SELECT pid, tid, start_ns, end_ns, 0, range_id FROM nvtx_ranges WHERE style = 'StartEnd'
  UNION ALL
  SELECT pid, tid, start_ns, end_ns, 2, name_id FROM os_calls WHERE nesting_level = 0
  UNION ALL
  SELECT pid, tid, start_ns, end_ns, 1, name_id FROM api_calls WHERE $cuda
), near AS (  -- only what can touch a gap, on threads other than the one waiting in every gap
  SELECT a.* FROM acts a, bounds b
  WHERE a.start_ns < b.hi AND a.end_ns > b.lo AND a.end_ns > a.start_ns AND NOT (a.pid = $skip_pid AND a.tid = $skip_tid)
), first_gap AS (  -- per device, the first gap that ends after the activity starts ...
  SELECT a.*, x.dev, x.ord AS o1 FROM near a CROSS JOIN devs d ASOF JOIN gs x ON x.dev = d.dev AND a.start_ns < x.end_ns
), spans AS (  -- ... and the last that starts before it ends: the activity overlaps the gaps between, if any
  SELECT f.*, y.ord AS o2 FROM first_gap f ASOF JOIN gs y ON y.dev = f.dev AND f.end_ns > y.start_ns
  WHERE y.ord >= f.o1
), per AS (
  SELECT g.gap_id, a.pid, a.tid, a.kind, a.id, g.end_ns - g.start_ns AS gap_ns,
         sum(least(a.end_ns, g.end_ns) - greatest(a.start_ns, g.start_ns)) AS ov
  FROM spans a JOIN gs g ON g.dev = a.dev AND g.ord BETWEEN a.o1 AND a.o2
  WHERE NOT (a.pid = g.gpid AND a.tid = g.gtid)
  GROUP BY ALL
), named AS (  -- each range or call name once: its domain and whether it waits
  SELECT a.pid, a.tid, a.kind, a.id, ['nvtx', 'cuda', 'os'][a.kind + 1] AS kind_name,
         CASE WHEN a.kind = 0 THEN r.domain ELSE '' END AS domain,
         CASE WHEN a.kind = 0 THEN range_op_name(r.name) ELSE s.value END AS name,
         CASE a.kind
           WHEN 0 THEN false
           WHEN 1 THEN s.value ILIKE '%synchronize%' OR s.value ILIKE '%waitevent%' OR s.value ILIKE '%eventquery%'
                       OR s.value ILIKE '%streamquery%'
           ELSE regexp_matches(s.value, '^(e?poll|ppoll|p?select|epoll_p?wait|futex|pthread_cond_(timed|clock)?wait'
                               || '|pthread_join|pthread_(mutex|rwlock)_(timed|clock)?(rd|wr)?lock'
                               || '|sem_(timed|clock)?wait|(clock_)?nanosleep|u?sleep|accept4?'
                               || '|recv(from|msg|mmsg)?|p?readv?|pread64|wait(pid|id|4)?|sigwait.*|msgrcv)$')
         END AS waiting
  FROM (SELECT DISTINCT pid, tid, kind, id FROM per) a
  LEFT JOIN nvtx_ranges r ON a.kind = 0 AND r.range_id = a.id
  LEFT JOIN strings s ON a.kind > 0 AND s.id = a.id
)
SELECT p.gap_id, p.pid, pr.name AS process, p.tid, t.name AS thread, n.kind_name AS kind, n.domain, n.name,
       coalesce(n.waiting, false) AS waiting,
       -- a thread does one thing of a kind at a time; where an export's calls of one thread overlap, the sum is
       -- capped at the gap's length
       least(sum(p.ov), any_value(p.gap_ns))::BIGINT AS overlap_ns
FROM per p JOIN named n USING (pid, tid, kind, id)
LEFT JOIN processes pr ON pr.pid = p.pid
LEFT JOIN threads t ON t.pid = p.pid AND t.tid = p.tid
GROUP BY p.gap_id, p.pid, pr.name, p.tid, t.name, n.kind_name, n.domain, n.name, n.waiting;
