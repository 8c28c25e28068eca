-- @tables gpu_metric_samples
-- @param $bins BIGINT: how many equal bins [$t0, $t1) is cut in
-- @param $t0 BIGINT: start of the time window, ns
-- @param $t1 BIGINT: end of the time window, ns

-- SMs Active and Tensor Active over time, binned for a strip under the GPU timeline (the report draws it): per
-- device, metric and bin of [$t0, $t1) cut in $bins equal bins, the mean of the samples taken in the bin
-- (they are evenly spaced, so the plain mean is the time-weighted one). Bins without a sample have no row.
SELECT
  device_id, metric,
  floor((timestamp_ns - $t0) * $bins / ($t1 - $t0))::BIGINT AS bin,
  ($t0 + floor((timestamp_ns - $t0) * $bins / ($t1 - $t0)) * ($t1 - $t0) / $bins)::BIGINT AS start_ns,
  avg(value) AS mean
FROM gpu_metric_samples
WHERE timestamp_ns >= $t0 AND timestamp_ns < $t1
  AND metric IN ('SMs Active', 'SM Active', 'Tensor Active', 'Tensor Active / FP16 Active')
  AND (unit IS NULL OR contains(unit, '%'))
GROUP BY ALL
ORDER BY device_id, metric, bin;
