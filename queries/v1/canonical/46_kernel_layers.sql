-- nsysql canonical schema v1: the layers of a device's kernel time (compute, communication, both), as a macro
-- over gpu_ops and kernel_classes, for the analyses of communication overlap and of the step's time partition.
-- A macro, not a table: the analyses ask it of one device, and a load that no such question follows pays
-- nothing for it.

-- The time a device spent in kernels, in three layers, each the union of its kernels' intervals
-- (union_stretches): `compute` (kernels that are not communication, and CUDA graph replays recorded whole),
-- `comm` (kernels of category `communication` by the rules of 44_kernel_rules.sql: NCCL and other
-- collectives) and `kernels` (both; listed only for devices with communication: elsewhere it is `compute`).
-- Communication overlapped by compute is |comm| + |compute| - |kernels|; exposed communication (no compute
-- beside it on any stream) is |kernels| - |compute|. Reads gpu_ops and kernel_classes.
CREATE OR REPLACE MACRO kernel_layers(
  -- INTEGER: the device (gpu_ops.device_id), or NULL for every device
  device
)
-- TABLE(device_id, layer, start_ns, end_ns, busy_before_ns): union_stretches' rows, per device and layer
-- (layer: `compute`, `comm` or `kernels`)
AS TABLE
WITH k AS (
  SELECT o.device_id, o.start_ns, o.end_ns, coalesce(c.category = 'communication', false) AS is_comm
  FROM gpu_ops o
  LEFT JOIN kernel_classes c ON c.name_id = o.name_id AND o.kind = 'kernel'
  WHERE o.kind IN ('kernel', 'graph') AND o.device_id IS NOT NULL AND (device IS NULL OR o.device_id = device)
), with_comm AS (
  SELECT DISTINCT device_id FROM k WHERE is_comm
), l AS (  -- key: device * 4 + layer (0 compute, 1 comm, 2 kernels)
  SELECT device_id * 4 + CASE WHEN is_comm THEN 1 ELSE 0 END AS key, start_ns, end_ns FROM k
  UNION ALL
  SELECT device_id * 4 + 2, start_ns, end_ns FROM k WHERE device_id IN (SELECT device_id FROM with_comm)
)
SELECT (key // 4)::INTEGER AS device_id, ['compute', 'comm', 'kernels'][key % 4 + 1] AS layer,
       start_ns, end_ns, busy_before_ns
FROM union_stretches(l);
