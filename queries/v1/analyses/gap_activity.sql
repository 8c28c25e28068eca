-- What the other threads and processes of the profile were doing during GPU idle gaps: one row per gap and
-- activity, with the time the activity overlaps the gap.
-- $gap_ids, $starts, $ends, $pids, $tids: the gaps (parallel lists), each with the process and thread whose
-- wait it is (the device owner's main thread: the one gaps.sql reads the cause on). That thread's own activity
-- is the gap's cause already and is left out here; every other thread of every process counts.
--
-- The same job: every process of the export (nsys traces the process it starts and the children it forks or
-- spawns, each with its own pid; a DataLoader's worker processes are such children). Processes the export
-- merely names (the system's other processes in its process list) have no traced events, so no activity.
--
-- Activity, each source counted on its own (a range and an OS call inside it are two rows, not one):
--   nvtx  push/pop ranges of any domain: only the innermost range open on a thread counts (nvtx_open), so
--         nested ranges are never counted twice (an outer `Batch` range counts only where no inner range is
--         open); start/end ranges (not nested per thread) each count their own overlap
--   os    OS runtime calls (-t osrt) at nesting level 0 (a call made inside another traced call is part of it)
--   cuda  CUDA runtime/driver API calls
-- CPU sampling is not in the canonical tables, so samples count for nothing here.
--
-- Waiting, not work (`waiting` = true): OS calls that block until another thread, process, timer or file
-- descriptor is ready (poll/select/epoll, futex, pthread_cond_*wait, pthread_join, mutex and rwlock locks,
-- sem_*wait, sleeps, accept, recv*, read*, wait*: a blocking read of a pipe or socket cannot be told apart from
-- a file read by name, and both wait for someone else), and CUDA calls that wait for the GPU (*Synchronize*,
-- *WaitEvent*, *EventQuery*, *StreamQuery*: the sync kind of gaps.sql). They are reported, ranked after all
-- work, and never named as what the idle time waited on. Every other call, and every NVTX range, is work.
--
-- Overlap: least(activity end, gap end) - greatest(activity start, gap start), summed per gap, thread and
-- activity (kind, domain, name).
WITH g AS (
  SELECT unnest($gap_ids) AS gap_id, unnest($starts) AS start_ns, unnest($ends) AS end_ns,
         unnest($pids) AS gpid, unnest($tids) AS gtid
), bounds AS (
  SELECT min(start_ns) AS lo, max(end_ns) AS hi FROM g
), segs AS (  -- the innermost push/pop range of a thread from ts_ns until the thread's next change
  SELECT pid, tid, ts_ns AS start_ns, lead(ts_ns) OVER (PARTITION BY pid, tid ORDER BY ts_ns) AS end_ns, range_id
  FROM nvtx_open
), acts AS (
  SELECT s.pid, s.tid, s.start_ns, s.end_ns, 'nvtx' AS kind, r.domain, r.name, false AS waiting
  FROM segs s JOIN nvtx_ranges r USING (range_id)
  WHERE s.end_ns IS NOT NULL
  UNION ALL
  SELECT pid, tid, start_ns, end_ns, 'nvtx', domain, name, false FROM nvtx_ranges WHERE style = 'StartEnd'
  UNION ALL
  SELECT o.pid, o.tid, o.start_ns, o.end_ns, 'os', '', s.value,
         regexp_matches(s.value, '^(e?poll|ppoll|p?select|epoll_p?wait|futex|pthread_cond_(timed|clock)?wait'
                                 || '|pthread_join|pthread_(mutex|rwlock)_(timed|clock)?(rd|wr)?lock|sem_(timed|clock)?wait|(clock_)?nanosleep|u?sleep|accept4?'
                                 || '|recv(from|msg|mmsg)?|p?readv?|pread64|wait(pid|id|4)?|sigwait.*|msgrcv)$')
  FROM os_calls o JOIN strings s ON s.id = o.name_id
  WHERE o.nesting_level = 0
  UNION ALL
  SELECT a.pid, a.tid, a.start_ns, a.end_ns, 'cuda', '', s.value,
         s.value ILIKE '%synchronize%' OR s.value ILIKE '%waitevent%' OR s.value ILIKE '%eventquery%'
         OR s.value ILIKE '%streamquery%'
  FROM api_calls a JOIN strings s ON s.id = a.name_id
), near AS (  -- only what can touch a gap
  SELECT a.* FROM acts a, bounds b WHERE a.start_ns < b.hi AND a.end_ns > b.lo AND a.end_ns > a.start_ns
)
SELECT g.gap_id, a.pid, p.name AS process, a.tid, t.name AS thread, a.kind, a.domain, a.name, a.waiting,
       sum(least(a.end_ns, g.end_ns) - greatest(a.start_ns, g.start_ns))::BIGINT AS overlap_ns
FROM near a JOIN g ON a.start_ns < g.end_ns AND a.end_ns > g.start_ns
LEFT JOIN processes p ON p.pid = a.pid
LEFT JOIN threads t ON t.pid = a.pid AND t.tid = a.tid
WHERE NOT (a.pid = g.gpid AND a.tid = g.gtid)
GROUP BY ALL;
