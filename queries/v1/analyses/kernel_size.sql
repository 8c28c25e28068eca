-- Kernel count and how many ran shorter than $short_ns, for the launch-bound rule.
SELECT count(*) AS kernels, count(*) FILTER (WHERE duration_ns < $short_ns) AS short_kernels
FROM gpu_ops WHERE kind = 'kernel';
