-- @tables processes, thread_roles

-- Every thread of thread_roles with its process's name: who the CPU answers are about.
SELECT r.pid, p.name AS process, r.tid, r.name AS thread, r.role, r.parent_pid
FROM thread_roles r
LEFT JOIN processes p ON p.pid = r.pid;
