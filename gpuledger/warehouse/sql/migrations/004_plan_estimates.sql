-- 004: what the plan knew about each trial, so that later plans learn from it and reports show
-- the cloud equivalent of local trials.
--   est_flops: the trial's training FLOPs as planned (estimator); calibration divides it by the
--              measured wall-clock (gpuledger/plan/calibration.py)
--   est_basis: where est_wall_s comes from: 'estimate' | 'calibrated on N runs' | 'measured'
--   cloud_equiv_*: for a local trial, the cloud GPU a `launcher: skypilot` plan of the same spec
--              picks (accelerator, GPU count, instance, cloud, spot) and the trial's time (s) and
--              cost (USD) there, from the bundled catalog
ALTER TABLE trials ADD COLUMN IF NOT EXISTS est_flops DOUBLE;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS est_basis VARCHAR;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_accelerator VARCHAR;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_gpus INTEGER;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_instance_type VARCHAR;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_cloud VARCHAR;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_spot BOOLEAN;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_wall_s DOUBLE;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS cloud_equiv_usd DOUBLE;
