-- 045: packed trials (resources.trials_per_gpu k > 1: k agents side by side in one job on one slot/GPU,
-- gpuledger/launch/local.py, gpuledger/launch/skypilot.py): the slot (job) a run shared, its share of
-- the slot's bill (the planner's compute seconds of its work over the slot's, or equal), the trials in
-- the slot and the job's wall-clock; the run's billing line is price x pack_wall_s x pack_share, so a
-- slot's runs sum to its cost. NULL for a run that had its slot to itself.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pack_slot VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pack_share DOUBLE;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pack_k INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pack_wall_s DOUBLE;
