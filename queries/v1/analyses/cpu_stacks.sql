-- @tables cpu_stack_frames, strings
-- @param $stack_ids BIGINT[]: the stacks wanted

-- The frames of each stack, outermost first (the order of flame-graph folded stacks), as names.
SELECT f.stack_id, list(coalesce(s.value, '?') ORDER BY f.depth DESC) AS frames
FROM cpu_stack_frames f
LEFT JOIN strings s ON s.id = f.frame_id
WHERE f.stack_id IN (SELECT unnest($stack_ids))
GROUP BY f.stack_id;
