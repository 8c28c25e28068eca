-- @staging raw_cuda_device, raw_cuda_gpu_info, raw_gpu_info, raw_graph, raw_kernel, raw_memcpy, raw_memset
-- @defines devices

-- nsysql canonical schema v1: GPUs.

-- One row per GPU, from TARGET_INFO_GPU (2021.2 and later) and TARGET_INFO_CUDA_GPU (older; 2020-2021 exports
-- have both, the SM count, memory and compute capability only in the latter), plus any device id that GPU
-- work ran on but the export does not describe. A described device with no compute capability, no SMs and no
-- GPU work is not a CUDA GPU (Windows exports list the Intel iGPU and `Microsoft Basic Render Driver`): left out.

-- Which described GPU a CUDA device id (gpu_ops.device_id, CUPTI's deviceId) is: TARGET_INFO_CUDA_DEVICE (2025.5
-- and later) maps each process's CUDA device id (cudaId) to its GPU (gpuId, TARGET_INFO_GPU.id). Older exports
-- have no such map, and the GPU whose id is the device id describes it (as nsys's stats scripts join them); but
-- their TARGET_INFO_GPU (2021.2 to 2025.3) also has a `cuDevice`, which differs from the id in some exports (two
-- public ones of four GPUs), so the compute capability is said only where every GPU that may be the device (by
-- id, by cuDevice, or by the map) that states one states the same: otherwise NULL, not a guess.
-- Where the map exists, a GPU no traced process used has no CUDA device id and is left out.
CREATE OR REPLACE TABLE devices AS
WITH gpus AS (  -- a value of either table, said only where every row of the id that states one states the same
  -- (count(DISTINCT) passes NULLs over): two rows of one id that name different GPUs describe none of them
  SELECT
    id AS gpu_id,
    CASE WHEN count(DISTINCT name) = 1 THEN any_value(name) END AS name,
    CASE WHEN count(DISTINCT nullif(smCount, 0)) = 1 THEN any_value(nullif(smCount, 0)) END AS sm_count,
    CASE WHEN count(DISTINCT m) = 1 THEN any_value(m) END AS memory_bytes,
    CASE WHEN count(DISTINCT cc) = 1 THEN any_value(cc) END AS compute_capability,
    any_value(cuDevice) AS cu_device
  FROM (
    SELECT *,
           CASE WHEN totalMemory = 0 THEN NULL
                WHEN totalMemory < 1048576 THEN totalMemory * 1048576 ELSE totalMemory END AS m,
           CASE WHEN computeMajor > 0 THEN computeMajor || '.' || coalesce(computeMinor, 0) END AS cc
    FROM (SELECT * FROM raw_gpu_info UNION ALL SELECT * FROM raw_cuda_gpu_info)
  )
  WHERE id IS NOT NULL
  GROUP BY id
), candidates AS (  -- (CUDA device id, GPU it may be, whether it is the one that names the device)
  SELECT DISTINCT cudaId AS device_id, gpuId AS gpu_id, true AS primary_ FROM raw_cuda_device WHERE cudaId IS NOT NULL
  UNION ALL
  SELECT gpu_id, gpu_id, true FROM gpus WHERE NOT EXISTS (SELECT 1 FROM raw_cuda_device)
  UNION ALL
  SELECT cu_device, gpu_id, false FROM gpus
  WHERE cu_device IS NOT NULL AND cu_device <> gpu_id AND NOT EXISTS (SELECT 1 FROM raw_cuda_device)
), described AS (
  SELECT
    c.device_id,
    -- a device that several processes map to different GPUs is described by none of them
    CASE WHEN count(DISTINCT c.gpu_id) FILTER (c.primary_) = 1 THEN any_value(g.name) FILTER (c.primary_) END AS name,
    CASE WHEN count(DISTINCT c.gpu_id) FILTER (c.primary_) = 1 THEN any_value(g.sm_count) FILTER (c.primary_) END
      AS sm_count,
    CASE WHEN count(DISTINCT c.gpu_id) FILTER (c.primary_) = 1 THEN any_value(g.memory_bytes) FILTER (c.primary_) END
      AS memory_bytes,
    CASE WHEN count(DISTINCT g.compute_capability) = 1 THEN any_value(g.compute_capability) END
      AS compute_capability
  FROM candidates c JOIN gpus g USING (gpu_id)
  GROUP BY c.device_id
  HAVING count(*) FILTER (c.primary_) > 0
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
