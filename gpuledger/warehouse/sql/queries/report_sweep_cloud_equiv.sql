-- Per trial of a (local) sweep, what it would cost on the cloud GPU a `launcher: skypilot` plan of
-- the same spec picks: the plan's estimate, stored with the trial (migration 004), in launch order.
SELECT trial_id, cloud_equiv_accelerator AS accelerator, cloud_equiv_gpus AS gpus, cloud_equiv_cloud AS cloud,
       cloud_equiv_instance_type AS instance_type, cloud_equiv_spot AS spot, cloud_equiv_wall_s AS wall_s,
       cloud_equiv_usd AS cost_usd
FROM trials
WHERE sweep_id = $sweep_id AND cloud_equiv_usd IS NOT NULL
ORDER BY trial_index NULLS LAST, trial_id
