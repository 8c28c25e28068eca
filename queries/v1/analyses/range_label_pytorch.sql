-- @tables nvtx_ranges
-- @macros is_torch_range, range_family_label
-- @param $label VARCHAR: a range_family_label

-- Whether the NVTX ranges shown as $label (range_family_label, as a gap cause `host:<label>` names them) are
-- ranges PyTorch opened itself (is_torch_range): such a cause is an operator's work on the CPU, whatever its
-- name says (`aten::batch_norm` is no data loader).
SELECT coalesce(bool_or(is_torch_range(name)), false) AS pytorch
FROM nvtx_ranges WHERE range_family_label(name) = $label;
