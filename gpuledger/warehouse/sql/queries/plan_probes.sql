-- Usable probes of a model and method (v_probes), newest first, for the planner
-- (gpuledger/plan/probes.py): the probe's shape (JSON), where it ran ('CPU' for local runs, as in
-- plan_measurements), its start-up seconds, steady tokens per second and peak memory (GiB: NVML
-- device level on GPUs, RSS on the CPU), and when it ended. warm_startup_s: the least start-up of any
-- probe of the same shape (on the same host for local runs, whose caches persist; the start-up-only
-- probes `gpuledger probe` runs locally included): a first run on a machine may pay one-time work (a
-- download, the demo's pretrained base) that the trials after it find cached. cpu_cores: the cores the
-- probe's trainer used in its steady state (the plan's assumptions say it for local probes). step_s_p10/p50/p90:
-- the spread of its own step times, the band of a plan extrapolated from it. rollout_s .. sync_s,
-- rl_step_s, rollout_tokens_per_s: an RL trainer's measured seconds per step by role (null otherwise),
-- which a probed GRPO/PPO trial's roles rest on (gpuledger/plan/rl_roles.py).
WITH probes AS (
    SELECT *,
           min(startup_s) OVER (PARTITION BY probe_shape::VARCHAR,
                                             CASE WHEN launcher = 'local' THEN hostname END) AS warm_startup_s
    FROM v_probes
    WHERE model = $model AND method = $method AND startup_s IS NOT NULL
)
SELECT run_id,
       trial_id,
       sweep_id,
       CASE WHEN launcher = 'local' THEN 'CPU' ELSE accelerator END AS accelerator,
       CASE WHEN launcher = 'local' THEN 1 ELSE gpus END AS gpus,
       hostname,
       probe_shape,
       startup_s,
       warm_startup_s,
       tokens_per_s,
       step_s,
       step_s_p10,
       step_s_p50,
       step_s_p90,
       step_times,
       cpu_cores,
       steady_s,
       tokens_source,
       memory_gib,
       cost_usd,
       ended_at,
       rollout_s,
       logprob_s,
       reward_s,
       train_s,
       sync_s,
       rl_step_s,
       rollout_tokens_per_s
FROM probes
WHERE usable
ORDER BY ended_at DESC, run_id
