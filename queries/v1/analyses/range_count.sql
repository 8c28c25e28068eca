-- @tables nvtx_ranges
-- @param $names VARCHAR[]: the range names

-- Push/pop instances of the named ranges ($names) per thread and depth: where a --range finds its iterations.
-- with_children: how many of them enclose a child range (none: the range is a delimiter).
SELECT r.pid, r.tid, r.depth, count(*) AS n,
       count(*) FILTER (WHERE r.range_id IN (SELECT parent_id FROM nvtx_ranges WHERE parent_id IS NOT NULL))
         AS with_children
FROM nvtx_ranges r
WHERE r.style = 'PushPop' AND list_contains($names, r.name)
GROUP BY r.pid, r.tid, r.depth
ORDER BY n DESC, r.depth, r.tid;
