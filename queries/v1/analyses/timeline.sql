-- @tables gpu_busy
-- @param $bins BIGINT: how many equal bins [$t0, $t1) is cut in
-- @param $device INTEGER: the device (gpu_ops.device_id)
-- @param $t0 BIGINT: start of the time window, ns
-- @param $t1 BIGINT: end of the time window, ns

-- GPU busy time of device $device in $bins equal bins over [$t0, $t1) (ns): the busy ns inside each bin,
-- read from gpu_busy's prefix sums (busy_before_ns) at the bin edges with ASOF joins, so the cost does not
-- grow with the number of busy stretches. For the report's timeline strip.
WITH edges AS (
  SELECT k, ($t0 + (($t1 - $t0) * k) // $bins)::BIGINT AS t FROM range(0, $bins + 1) r(k)
), dev AS (
  SELECT start_ns, end_ns, busy_before_ns FROM gpu_busy WHERE device_id = $device
), b AS (
  SELECT e.k, e.t,
         coalesce(d.busy_before_ns + least(greatest(e.t - d.start_ns, 0), d.end_ns - d.start_ns), 0) AS busy
  FROM edges e ASOF LEFT JOIN dev d ON e.t >= d.start_ns
)
SELECT b.k AS bin, b.t AS start_ns, n.t AS end_ns, (n.busy - b.busy)::BIGINT AS busy_ns,
       100.0 * (n.busy - b.busy) / nullif(n.t - b.t, 0) AS busy_pct
FROM b JOIN b n ON n.k = b.k + 1
ORDER BY bin;
