-- Usable probes of a model and method (v_probes), newest first, for the planner
-- (gpuledger/plan/probes.py): the probe's shape (JSON), where it ran ('CPU' for local runs, as in
-- plan_measurements), its start-up seconds, steady tokens per second and peak memory (GiB: NVML
-- device level on GPUs, RSS on the CPU), and when it ended.
SELECT run_id,
       trial_id,
       sweep_id,
       CASE WHEN launcher = 'local' THEN 'CPU' ELSE accelerator END AS accelerator,
       CASE WHEN launcher = 'local' THEN 1 ELSE gpus END AS gpus,
       hostname,
       probe_shape,
       startup_s,
       tokens_per_s,
       step_s,
       steady_s,
       tokens_source,
       memory_gib,
       cost_usd,
       ended_at
FROM v_probes
WHERE usable AND model = $model AND method = $method
ORDER BY ended_at DESC, run_id
