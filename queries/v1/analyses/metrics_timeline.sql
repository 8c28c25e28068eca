-- @tables gpu_metric_activity
-- @param $bins BIGINT: how many equal bins [$t0, $t1) is cut in
-- @param $t0 BIGINT: start of the time window, ns
-- @param $t1 BIGINT: end of the time window, ns

-- SMs Active and Tensor Active over time, binned for a strip under the GPU timeline (the report draws it): per
-- device, metric and bin of [$t0, $t1) cut in $bins equal bins, the mean of the samples taken in the bin
-- (they are evenly spaced, so the plain mean is the time-weighted one). Bins without a sample have no row.
SELECT
  device_id, metric,
  floor((t0_ns - $t0) * $bins / ($t1 - $t0))::BIGINT AS bin,
  ($t0 + floor((t0_ns - $t0) * $bins / ($t1 - $t0)) * ($t1 - $t0) / $bins)::BIGINT AS start_ns,
  avg(value) AS mean
FROM gpu_metric_activity  -- those two metrics' samples alone, in a percent unit
WHERE t0_ns >= $t0 AND t0_ns < $t1
GROUP BY ALL
ORDER BY device_id, metric, bin;
