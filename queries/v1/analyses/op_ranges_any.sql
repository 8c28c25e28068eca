-- @tables nvtx_ranges, profile_facts
-- @macros is_torch_op

-- Whether the export has a PyTorch operator range (the ranges ops.sql reads as operator calls), and whether
-- anything in it shows PyTorch (profile_facts' framework rule): what `ops` says where it has none, read without
-- running ops.sql.
SELECT
  EXISTS (SELECT 1 FROM nvtx_ranges WHERE style = 'PushPop' AND contains(name, '::') AND is_torch_op(name)) AS ops,
  EXISTS (SELECT 1 FROM profile_facts WHERE key = 'framework' AND value = 'PyTorch') AS torch;
