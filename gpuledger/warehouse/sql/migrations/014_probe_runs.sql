-- 014: probe runs (`gpuledger probe`, docs/probes.md). A probe is a short run of a sweep's real trial
-- command that measures one shape of the sweep (GPU type and count, sharding, micro-batch, sequence
-- length): it is stored as a run of the trial it ran, with purpose 'probe' (every earlier run is a
-- 'trial' attempt) and the shape it stands for as JSON. Views that describe trials count only
-- purpose 'trial'; spend (and the budget) counts both.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS purpose VARCHAR DEFAULT 'trial';
UPDATE runs SET purpose = 'trial' WHERE purpose IS NULL;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS probe_shape JSON;
