-- @tables gpu_ops, op_launch, strings
-- @macros api_display_name, stats_durations
-- @param $by VARCHAR: 'kernel' rolls the rows up per kernel name; 'launch': one row per launch site

-- Launch latency: per (pid, tid, device, launching API, kernel name), how long a kernel takes from the launch
-- call's start to its end, split into the call, the queue and the kernel: the same figures as `nsys stats -r
-- cuda_kern_exec_sum`. Every kernel (gpu_ops of kind `kernel`) whose launching call was traced; the node kernels
-- of a replayed CUDA graph each count once, with the graph launch's call (graphs recorded whole have no kernels).
--   total  = the later of the call's end and the kernel's end, minus the call's start
--   api    = the call's end minus its start
--   queue  = the kernel's start minus the call's end, only where not negative (a kernel that starts before its
--            call returns never queued: it is left out of the queue figures and of queue_count; one that starts
--            the moment the call returns is counted with 0 ns, as nsys counts it)
--   kernel = the kernel's end minus its start
-- $by: 'kernel' rolls the rows up per kernel name (pid, tid, device_id and api_name are then NULL).
-- Medians average the two middle values of an even count; standard deviations are of the sample (n - 1), 0
-- for one value (and for none: nsys prints 0.0 where no kernel queued).
WITH l AS (
  SELECT CASE WHEN $by = 'kernel' THEN NULL ELSE o.pid END AS pid,
         CASE WHEN $by = 'kernel' THEN NULL ELSE la.api_tid END AS tid,
         CASE WHEN $by = 'kernel' THEN NULL ELSE o.device_id END AS device_id,
         CASE WHEN $by = 'kernel' THEN NULL ELSE api_display_name(an.value) END AS api_name,
         n.value AS kernel_name,
         greatest(la.api_end_ns, o.end_ns) - la.api_start_ns AS total,
         la.api_end_ns - la.api_start_ns AS api,
         CASE WHEN o.start_ns >= la.api_end_ns THEN o.start_ns - la.api_end_ns END AS queue,
         o.duration_ns AS kernel
  FROM gpu_ops o
  JOIN op_launch la ON la.op_id = o.op_id
  LEFT JOIN strings an ON an.id = la.api_name_id
  LEFT JOIN strings n ON n.id = o.name_id
  WHERE o.kind = 'kernel' AND la.api_call_id IS NOT NULL
), s AS (  -- per group, the nsys-stats figures of each time (stats_durations, 00_macros.sql)
  SELECT pid, tid, device_id, api_name, kernel_name, count(*) AS count, count(queue) AS queue_count,
         stats_durations(total) AS total_s, stats_durations(api) AS api_s, stats_durations(queue) AS queue_s,
         stats_durations(kernel) AS kernel_s
  FROM l
  GROUP BY ALL
)
SELECT
  -- process that launched the kernels
  pid,
  -- thread that launched them
  tid,
  -- CUDA device they ran on
  device_id,
  -- the launching call, as nsys prints it (`cudaLaunchKernel`, `cudaLaunchKernelExC_v11060`, `cudaGraphLaunch_v10000`)
  api_name,
  -- the kernel's demangled name
  kernel_name,
  -- kernels launched
  count,
  -- kernels with a queue time (queue >= 0)
  queue_count,
  -- total: call start to the later of call end and kernel end, ns (avg, median, min, max, sample stddev)
  total_s.avg_ns AS total_avg_ns, total_s.med_ns AS total_med_ns, total_s.min_ns AS total_min_ns,
  total_s.max_ns AS total_max_ns, total_s.stddev_ns AS total_stddev_ns,
  -- api: the launch call, ns
  api_s.avg_ns AS api_avg_ns, api_s.med_ns AS api_med_ns, api_s.min_ns AS api_min_ns, api_s.max_ns AS api_max_ns,
  api_s.stddev_ns AS api_stddev_ns,
  -- queue: call end to kernel start, over the kernels that queued, ns (NULL where none did)
  queue_s.avg_ns AS queue_avg_ns, queue_s.med_ns AS queue_med_ns, queue_s.min_ns AS queue_min_ns,
  queue_s.max_ns AS queue_max_ns, queue_s.stddev_ns AS queue_stddev_ns,
  -- kernel: the kernel's duration, ns
  kernel_s.avg_ns AS kernel_avg_ns, kernel_s.med_ns AS kernel_med_ns, kernel_s.min_ns AS kernel_min_ns,
  kernel_s.max_ns AS kernel_max_ns, kernel_s.stddev_ns AS kernel_stddev_ns
FROM s
ORDER BY total_avg_ns DESC, pid, tid, device_id, api_name, kernel_name;
