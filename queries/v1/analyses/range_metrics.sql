-- @tables gpu_metric_periods, gpu_metric_samples, gpu_ops, nvtx_ranges, op_ranges
-- @macros overlaps_by_bucket, range_op_name
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)

-- GPU metrics per NVTX range (domain, name, style), per device: the time-weighted mean of each metric over the
-- GPU-projected windows of its instances (first start to last end of the GPU ops it encloses, per graph replay
-- for the kernels of CUDA graph nodes it captured, as ranges.sql projects them), so a range that only enqueues
-- work is judged by when that work ran. Each sample counts for
-- its sampling period (gpu_metric_samples.timestamp_ns) as far as it overlaps a window; instances weigh by
-- their sampled GPU-projected time. $attribution: 'thread' or 'process' (see canonical/60_op_ranges.sql); under
-- 'process' PyTorch's ranges are named without their per-call arguments (range_op_name: one row per operator,
-- as ranges.sql by default), under 'thread' by their full names.
WITH proj AS (  -- replay: the graph launch of a captured op (op_range_totals), NULL for the ops launched inside
  SELECT x.range_id, o.device_id, min(o.start_ns) AS a, max(o.end_ns) AS b,
         CASE WHEN x.via = 'capture' THEN coalesce(o.correlation_id, -1 - o.op_id) END AS replay
  FROM op_ranges x JOIN gpu_ops o USING (op_id)
  WHERE x.via = 'thread' OR $attribution = 'process'
  GROUP BY ALL
), p AS (
  SELECT device_id, t0_ns AS t0, t1_ns AS t1 FROM gpu_metric_periods
), o AS (  -- each window against the sampling periods it overlaps (overlaps_by_bucket, canonical/00_macros.sql):
           -- once per period, then its samples of every metric (not once per sample)
  SELECT range_id, device_id, t0, overlap_ns FROM overlaps_by_bucket('proj', 'p')
)
SELECT
  CASE WHEN $attribution = 'process' THEN range_op_name(r.name) ELSE r.name END AS range, r.domain, o.device_id,
  s.metric, s.unit,
  count(DISTINCT o.range_id) AS instances,
  sum(s.value * o.overlap_ns) / sum(o.overlap_ns) AS mean
FROM o
JOIN gpu_metric_samples s ON s.device_id = o.device_id AND s.timestamp_ns = o.t0
JOIN nvtx_ranges r USING (range_id)
GROUP BY 1, r.domain, r.style, o.device_id, s.metric, s.unit
ORDER BY r.domain, range, o.device_id, s.metric, s.unit;
