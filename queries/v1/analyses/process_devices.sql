-- @tables process_roles

-- Per process with GPU work: its main device and main thread (canonical process_roles).
SELECT pid, device_id, ops, main_tid FROM process_roles ORDER BY ops DESC;
