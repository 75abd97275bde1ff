-- The user's own runs next to their estimates, for the estimator's learnt corrections
-- (gpuledger/estimate/calibration.py: memory and time) and `gpuledger accuracy`: one row per succeeded
-- run, with its sweep's model and training method, the GPU (NULL and 0 GPUs for a local CPU run),
-- the planned device memory and wall-clock of its trial and what the run measured (peak NVML
-- device memory, or peak RSS on the CPU; wall-clock), and where the plan's time came from
-- (est_basis: 'estimate', 'calibrated on N runs', 'measured'; NULL for plans older than it).
SELECT e.run_id,
       e.sweep_id,
       s.model,
       s.method,
       e.accelerator,
       e.gpus,
       e.est_memory_gib,
       e.measured_memory_gib,
       e.est_wall_s,
       e.wall_s,
       t.est_basis
FROM v_estimate_accuracy e
JOIN sweeps s ON s.sweep_id = e.sweep_id
LEFT JOIN trials t ON t.sweep_id = e.sweep_id AND t.trial_id = e.trial_id
WHERE e.status = 'succeeded'
ORDER BY e.run_id
