-- One sweep's ($sweep_id) RL trials measured by role: per trial run (purpose 'trial'), the seconds its
-- trainer logged per role summed over its optimizer steps (gpuledger/integrations/trl.py: rl_rollout_s,
-- rl_logprob_s, rl_reward_s, rl_train_s, rl_sync_s; rl_step_s their wall-clock), the steps, and the run's
-- cost; runs that logged no roles are absent. The report splits each run's cost by the roles' share of its
-- logged step time (gpuledger/report/rl_roles.py).
SELECT r.run_id,
       r.trial_id,
       r.status,
       r.accelerator,
       r.gpus,
       r.cost_usd,
       r.wall_s,
       count(*) FILTER (WHERE m.name = 'rl_step_s') AS steps,
       sum(m.value) FILTER (WHERE m.name = 'rl_rollout_s') AS rollout_s,
       sum(m.value) FILTER (WHERE m.name = 'rl_logprob_s') AS logprob_s,
       sum(m.value) FILTER (WHERE m.name = 'rl_reward_s') AS reward_s,
       sum(m.value) FILTER (WHERE m.name = 'rl_train_s') AS train_s,
       sum(m.value) FILTER (WHERE m.name = 'rl_sync_s') AS sync_s,
       sum(m.value) FILTER (WHERE m.name = 'rl_step_s') AS step_s
FROM runs r
JOIN metrics m ON m.run_id = r.run_id
WHERE r.sweep_id = $sweep_id AND r.purpose = 'trial' AND m.step >= 1
  AND m.name IN ('rl_rollout_s', 'rl_logprob_s', 'rl_reward_s', 'rl_train_s', 'rl_sync_s', 'rl_step_s')
GROUP BY ALL
ORDER BY r.trial_id, r.run_id
