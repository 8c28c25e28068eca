-- @include 00_macros.sql
-- @staging raw_graph_nodes
-- @macros global_pid, global_tid
-- @defines graph_nodes
-- @empty_without raw_graph_nodes

-- nsysql canonical schema v1: CUDA graph nodes, and where the program created the work each one runs.
-- CUDA_GRAPH_NODE_EVENTS (recorded with --cuda-graph-trace=node) has a row per node creation, with its thread
-- and time: the nodes a stream capture or cudaGraphAdd*Node creates (no originalGraphNodeId), and the copies
-- made when a graph is instantiated or cloned (originalGraphNodeId: the node copied). A kernel replayed from an
-- instantiated graph carries its copy's id (gpu_ops.graph_node_id); following the originals back to a node that
-- copies none gives the node the program created, whose row's thread and time place the work inside the NVTX
-- ranges open while the graph was captured (60_op_ranges.sql credits the node kernels to them).

CREATE OR REPLACE TEMP TABLE _graph_node_rows AS  -- per (process, node): the node it copies, and its first creation
SELECT global_pid(globalTid) AS pid, graphNodeId AS node,
       min(originalGraphNodeId) AS orig,  -- rows that disagree (none seen) give one answer, the least
       arg_min(global_tid(globalTid), (start, globalTid)) AS tid, min(start) AS ts
FROM raw_graph_nodes
WHERE graphNodeId IS NOT NULL AND globalTid IS NOT NULL AND start IS NOT NULL
GROUP BY ALL;

-- Each node with the end of its chain of originals: at most 64 copies deep, so that a cycle (a broken or hostile
-- export) ends; a chain that has not ended there, or ends at a node without a row, has no creator (below).
CREATE OR REPLACE TEMP TABLE _graph_roots AS
WITH RECURSIVE walk(pid, node, cur, hops) AS (
  SELECT pid, node, node, 0 FROM _graph_node_rows
  UNION ALL
  SELECT w.pid, w.node, n.orig, w.hops + 1
  FROM walk w JOIN _graph_node_rows n ON n.pid = w.pid AND n.node = w.cur
  WHERE n.orig IS NOT NULL AND w.hops < 64
)
SELECT pid, node, arg_max(cur, hops) AS root FROM walk GROUP BY ALL;

-- One row per CUDA graph node the export saw created.
CREATE OR REPLACE TABLE graph_nodes AS
WITH made AS (  -- the root when it is a node the program created (recorded, copying none)
  SELECT o.pid, o.node, r.node AS root, r.tid, r.ts
  FROM _graph_roots o JOIN _graph_node_rows r ON r.pid = o.pid AND r.node = o.root AND r.orig IS NULL
)
SELECT
  -- process id
  n.pid,
  -- the node's id: gpu_ops.graph_node_id of the work it ran
  n.node AS graph_node_id,
  -- the node it is a copy of (originalGraphNodeId: made when a graph is instantiated or cloned); NULL for a node
  -- the program created
  n.orig AS original_id,
  -- the node the program created that this one copies, through any number of copies (itself when it copies
  -- none); NULL when the chain of originals ends at a node the export did not record, or does not end
  m.root AS created_id,
  -- thread that created created_id: for a captured graph, the thread that captured it
  m.tid AS created_tid,
  -- when created_id was created, ns: inside the NVTX ranges open on created_tid while the graph was captured
  m.ts AS created_ns
FROM _graph_node_rows n LEFT JOIN made m USING (pid, node)
ORDER BY n.pid, n.node;
