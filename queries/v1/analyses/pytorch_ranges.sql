-- @tables nvtx_ranges
-- @macros is_torch_range

-- Push/pop NVTX ranges, and how many of them PyTorch opened itself (is_torch_range: emit_nvtx, `nsys profile
-- --pytorch=autograd-nvtx`): what iterations.detect says when no range is a candidate for the loop.
SELECT count(*) AS push_pop, count(*) FILTER (WHERE is_torch_range(name)) AS pytorch
FROM nvtx_ranges WHERE style = 'PushPop';
