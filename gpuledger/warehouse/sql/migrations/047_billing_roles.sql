-- 047: what each billing line paid for (issue 40: RL runs billed by role). A run whose roles run on
-- instances of their own (a SkyPilot job group: the trainer's task and the rollouts' task,
-- gpuledger/launch/skypilot_group.py) has one line per instance, each naming its role (trainer, rollout,
-- reward, ref: gpuledger.vocabulary.BILLING_ROLES) and the instance type, GPU kind and GPU count it
-- priced; a run on one instance has one line with role NULL (every role of the run on it). Lines stored
-- before 047 keep NULL in all four (the run's own instance_type/accelerator/gpus say the same).
ALTER TABLE billing ADD COLUMN IF NOT EXISTS role VARCHAR;
ALTER TABLE billing ADD COLUMN IF NOT EXISTS instance_type VARCHAR;
ALTER TABLE billing ADD COLUMN IF NOT EXISTS accelerator VARCHAR;
ALTER TABLE billing ADD COLUMN IF NOT EXISTS gpus INTEGER;
