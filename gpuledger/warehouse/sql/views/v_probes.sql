-- One row per probe run (runs.purpose = 'probe', `gpuledger probe`, docs/probes.md): what it measured
-- of its shape. Training steps are the steps >= 1 the trainer logged through gpuledger.track (a step
-- counts at the first point logged with its number). Start-up = the first training step's time since
-- the attempt started (process start, imports, model load, set-up and the first step's own cost);
-- the steady state = from the first to the last training step: its tokens are the difference of the
-- cumulative `tokens` the trainer reported there (tokens_source 'reported'), else steps x micro_batch x
-- seq_len x GPUs of the probe's shape (data parallel: every GPU takes a micro-batch).
-- cpu_cores: the CPU seconds the trainer process used in the steady window (the `process_cpu_s`
-- gpuledger.track adds to a probe's steps) / steady_s: the cores it used while sharing the machine
-- with the sweep's other probes and everything else that ran (1.0 = one core to itself).
-- An RL trainer's roles (gpuledger/integrations/trl.py: rl_rollout_s, rl_logprob_s, rl_reward_s,
-- rl_train_s, rl_sync_s, rl_step_s, rl_generated_tokens each optimizer step): the median of each over
-- the steady steps (after the first logged step, whose cost is start-up's), and the rollouts'
-- generation rate = generated tokens / rollout seconds summed over those steps; null for other trainers.
WITH steps AS (
    SELECT m.run_id,
           m.step,
           min(m.t_s) AS t_s,
           max(m.value) FILTER (WHERE m.name = 'tokens') AS tokens,
           min(m.value) FILTER (WHERE m.name = 'process_cpu_s') AS cpu_s
    FROM metrics m
    JOIN runs r ON r.run_id = m.run_id
    WHERE r.purpose = 'probe' AND m.step >= 1 AND m.t_s IS NOT NULL
    GROUP BY m.run_id, m.step
),
-- the probe's own step times (seconds per step between consecutive logged steps): their spread is the
-- band of a plan extrapolated from it (gpuledger/estimate/bands.py probe_band)
step_times AS (
    SELECT run_id,
           (t_s - lag(t_s) OVER (PARTITION BY run_id ORDER BY step))
               / nullif(step - lag(step) OVER (PARTITION BY run_id ORDER BY step), 0) AS dur_s
    FROM steps
),
spread AS (
    SELECT run_id,
           quantile_cont(dur_s, 0.1) AS step_s_p10,
           quantile_cont(dur_s, 0.5) AS step_s_p50,
           quantile_cont(dur_s, 0.9) AS step_s_p90,
           count(*) AS step_times
    FROM step_times
    WHERE dur_s > 0
    GROUP BY run_id
),
span AS (
    SELECT run_id,
           count(*) AS steps,
           min(t_s) AS startup_s,
           max(t_s) - min(t_s) AS steady_s,
           arg_max(step, t_s) - arg_min(step, t_s) AS steady_steps,
           arg_max(tokens, t_s) FILTER (WHERE tokens IS NOT NULL)
               - arg_min(tokens, t_s) FILTER (WHERE tokens IS NOT NULL) AS reported_tokens,
           count(tokens) AS token_points,
           arg_max(cpu_s, t_s) FILTER (WHERE cpu_s IS NOT NULL)
               - arg_min(cpu_s, t_s) FILTER (WHERE cpu_s IS NOT NULL) AS steady_cpu_s,
           count(cpu_s) AS cpu_points
    FROM steps
    GROUP BY run_id
),
torch_mem AS (
    SELECT run_id,
           max(value) FILTER (WHERE name = 'torch_max_memory_allocated_gib') AS torch_allocated_gib,
           max(value) FILTER (WHERE name = 'torch_max_memory_reserved_gib') AS torch_reserved_gib
    FROM final_metrics
    WHERE name IN ('torch_max_memory_allocated_gib', 'torch_max_memory_reserved_gib')
    GROUP BY run_id
),
first_step AS (
    SELECT run_id, min(step) AS step FROM steps GROUP BY run_id
),
rl_roles AS (
    SELECT m.run_id,
           median(m.value) FILTER (WHERE m.name = 'rl_rollout_s') AS rollout_s,
           median(m.value) FILTER (WHERE m.name = 'rl_logprob_s') AS logprob_s,
           median(m.value) FILTER (WHERE m.name = 'rl_reward_s') AS reward_s,
           median(m.value) FILTER (WHERE m.name = 'rl_train_s') AS train_s,
           median(m.value) FILTER (WHERE m.name = 'rl_sync_s') AS sync_s,
           median(m.value) FILTER (WHERE m.name = 'rl_step_s') AS rl_step_s,
           sum(m.value) FILTER (WHERE m.name = 'rl_generated_tokens')
               / nullif(sum(m.value) FILTER (WHERE m.name = 'rl_rollout_s'), 0) AS rollout_tokens_per_s,
           count(*) FILTER (WHERE m.name = 'rl_step_s') AS rl_steps
    FROM metrics m
    JOIN first_step f ON f.run_id = m.run_id AND m.step > f.step
    WHERE m.name IN ('rl_rollout_s', 'rl_logprob_s', 'rl_reward_s', 'rl_train_s', 'rl_sync_s', 'rl_step_s',
                     'rl_generated_tokens')
    GROUP BY m.run_id
),
base AS (
    SELECT r.run_id, r.sweep_id, s.name AS sweep_name, s.model, s.method, r.trial_id, r.status, r.launcher,
           r.accelerator, r.gpus, r.hostname, r.started_at, r.ended_at, r.wall_s, r.cost_usd, r.probe_shape,
           r.peak_rss_gib, r.peak_gpu_mem_gib, sp.steps, sp.startup_s, sp.steady_s, sp.steady_steps,
           CASE WHEN sp.cpu_points = sp.steps THEN sp.steady_cpu_s END AS steady_cpu_s,
           CASE WHEN sp.token_points >= 2 THEN sp.reported_tokens
                ELSE sp.steady_steps * TRY_CAST(json_extract(r.probe_shape, '$.micro_batch') AS DOUBLE)
                     * TRY_CAST(json_extract(r.probe_shape, '$.seq_len') AS DOUBLE) * greatest(r.gpus, 1) END
               AS steady_tokens,
           CASE WHEN sp.token_points >= 2 THEN 'reported' ELSE 'steps x micro_batch x seq_len x gpus' END
               AS tokens_source,
           tm.torch_allocated_gib, tm.torch_reserved_gib,
           st.step_s_p10, st.step_s_p50, st.step_s_p90, coalesce(st.step_times, 0) AS step_times,
           rl.rollout_s, rl.logprob_s, rl.reward_s, rl.train_s, rl.sync_s, rl.rl_step_s, rl.rollout_tokens_per_s,
           coalesce(rl.rl_steps, 0) AS rl_steps
    FROM runs r
    LEFT JOIN sweeps s ON s.sweep_id = r.sweep_id
    LEFT JOIN span sp ON sp.run_id = r.run_id
    LEFT JOIN torch_mem tm ON tm.run_id = r.run_id
    LEFT JOIN spread st ON st.run_id = r.run_id
    LEFT JOIN rl_roles rl ON rl.run_id = r.run_id
    WHERE r.purpose = 'probe'
)
SELECT run_id,
       sweep_id,
       sweep_name,
       model,
       method,
       trial_id,
       status,
       launcher,
       accelerator,
       gpus,
       hostname,
       started_at,
       ended_at,
       wall_s,
       cost_usd,
       probe_shape,
       coalesce(steps, 0) AS steps,
       startup_s,
       steady_s,
       steady_steps,
       steady_tokens,
       tokens_source,
       CASE WHEN steady_s > 0 AND steady_tokens > 0 THEN steady_tokens / steady_s END AS tokens_per_s,
       CASE WHEN steady_steps > 0 THEN steady_s / steady_steps END AS step_s,
       step_s_p10,
       step_s_p50,
       step_s_p90,
       step_times,
       steady_cpu_s,
       CASE WHEN steady_s > 0 AND steady_cpu_s >= 0 THEN steady_cpu_s / steady_s END AS cpu_cores,
       peak_rss_gib,
       peak_gpu_mem_gib,
       torch_allocated_gib,
       torch_reserved_gib,
       CASE WHEN gpus > 0 THEN peak_gpu_mem_gib ELSE peak_rss_gib END AS memory_gib,
       -- usable for planning: it ran as it should (succeeded; or stopped by its backstop timeout) and
       -- measured a steady state of at least one step
       status IN ('succeeded', 'failed') AND steady_s > 0 AND steady_tokens > 0 AND startup_s IS NOT NULL
           AND (status = 'succeeded' OR steady_steps >= 2) AS usable,
       rollout_s,
       logprob_s,
       reward_s,
       train_s,
       sync_s,
       rl_step_s,
       rollout_tokens_per_s,
       rl_steps
FROM base
