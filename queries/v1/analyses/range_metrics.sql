-- @tables gpu_metric_names, gpu_metric_periods, gpu_metric_values, gpu_ops, nvtx_ranges, op_ranges
-- @macros exact_weighted_mean, metric_sums_by_window, overlaps_by_bucket, range_op_name
-- @param $attribution VARCHAR: 'thread' (nsys's rule) or 'process' (canonical/60_op_ranges.sql)
-- @param $names VARCHAR[]: the range names to keep (nvtx_ranges.name, `--range`), NULL for all

-- GPU metrics per NVTX range (domain, name, style), per device: the time-weighted mean of each metric over the
-- GPU-projected windows of its instances (first start to last end of the GPU ops it encloses, per graph replay
-- for the kernels of CUDA graph nodes it captured, as ranges.sql projects them), so a range that only enqueues
-- work is judged by when that work ran. Each sample counts for
-- its sampling period (gpu_metric_samples.timestamp_ns) as far as it overlaps a window; instances weigh by
-- their sampled GPU-projected time. $attribution: 'thread' or 'process' (see canonical/60_op_ranges.sql); under
-- 'process' PyTorch's ranges are named without their per-call arguments (range_op_name: one row per operator,
-- as ranges.sql by default), under 'thread' by their full names. $names: the ranges kept, by their full names.
WITH proj AS (  -- replay: the graph launch of a captured op (op_range_totals), NULL for the ops launched inside
  SELECT x.range_id, o.device_id, min(o.start_ns) AS a, max(o.end_ns) AS b,
         CASE WHEN x.via = 'capture' THEN coalesce(o.correlation_id, -1 - o.op_id) END AS replay
  FROM op_ranges x JOIN gpu_ops o USING (op_id)
  WHERE (x.via = 'thread' OR $attribution = 'process')
    AND ($names IS NULL OR x.range_id IN (SELECT range_id FROM nvtx_ranges WHERE list_contains($names, name)))
  GROUP BY ALL
), p AS (
  SELECT device_id, t0_ns AS t0, t1_ns AS t1 FROM gpu_metric_periods
), o AS (  -- each window against the sampling periods it overlaps (overlaps_by_bucket, canonical/00_macros.sql):
           -- once per period, then its samples of every metric (not once per sample)
  SELECT range_id, device_id, t0, overlap_ns FROM overlaps_by_bucket('proj', 'p')
), k AS (  -- each metric with its device and name (gpu_metric_samples' join): the samples are summed per
           -- metric (gpu_metric_names.key), and the names joined to the sums rather than to every sample
  SELECT key, (type_id & 255)::INTEGER AS device_id, metric, unit FROM gpu_metric_names
), sums AS (  -- per window and metric, the sums of its time-weighted mean (canonical/00_macros.sql)
  SELECT * FROM metric_sums_by_window('o', 'k', 'gpu_metric_values')
)
SELECT
  CASE WHEN $attribution = 'process' THEN range_op_name(r.name) ELSE r.name END AS range, r.domain, s.device_id,
  k.metric, k.unit,
  count(DISTINCT s.range_id) AS instances,
  exact_weighted_mean(s.num_whole, s.num, s.whole, s.den) AS mean
FROM sums s
JOIN k USING (key)
JOIN nvtx_ranges r USING (range_id)
GROUP BY 1, r.domain, r.style, s.device_id, k.metric, k.unit
ORDER BY r.domain, range, s.device_id, k.metric, k.unit;
