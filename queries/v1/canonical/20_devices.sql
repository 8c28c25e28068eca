-- nsysql canonical schema v1: GPUs.

-- One row per GPU, from TARGET_INFO_GPU (2021.2 and later) and TARGET_INFO_CUDA_GPU (older; 2020-2021 exports
-- have both, the SM count, memory and compute capability only in the latter), plus any device id that GPU
-- work ran on but the export does not describe. A described device with no compute capability, no SMs and no
-- GPU work is not a CUDA GPU (Windows exports list the Intel iGPU and `Microsoft Basic Render Driver`): left out.
CREATE OR REPLACE TABLE devices AS
WITH described AS (  -- any_value takes the first non-NULL value of either table
  SELECT
    id AS device_id,
    any_value(name) AS name,
    any_value(nullif(smCount, 0)) AS sm_count,
    any_value(CASE WHEN totalMemory = 0 THEN NULL
                   WHEN totalMemory < 1048576 THEN totalMemory * 1048576 ELSE totalMemory END) AS memory_bytes,
    any_value(CASE WHEN computeMajor > 0 THEN computeMajor || '.' || coalesce(computeMinor, 0) END)
      AS compute_capability
  FROM (SELECT * FROM raw_gpu_info UNION ALL SELECT * FROM raw_cuda_gpu_info)
  WHERE id IS NOT NULL
  GROUP BY id
), used AS (
  SELECT DISTINCT deviceId AS device_id FROM raw_kernel
  UNION SELECT DISTINCT deviceId FROM raw_memcpy
  UNION SELECT DISTINCT deviceId FROM raw_memset
  UNION SELECT DISTINCT deviceId FROM raw_graph
)
SELECT
  -- CUDA device id, as in gpu_ops.device_id
  coalesce(d.device_id, u.device_id) AS device_id,
  -- marketing name, e.g. `NVIDIA H200`; NULL when the export does not say
  d.name,
  -- number of streaming multiprocessors
  d.sm_count,
  -- device memory in bytes (older exports give MiB; converted)
  d.memory_bytes,
  -- compute capability as `major.minor`
  d.compute_capability
FROM described d
FULL OUTER JOIN used u ON u.device_id = d.device_id
WHERE coalesce(d.device_id, u.device_id) IS NOT NULL
  AND (u.device_id IS NOT NULL OR d.compute_capability IS NOT NULL OR d.sm_count IS NOT NULL)
ORDER BY 1;
