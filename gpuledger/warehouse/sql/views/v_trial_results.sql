-- One row per trial (planned in `trials`, or only seen in `runs`), all attempts aggregated (trial
-- attempts only: a probe of the trial's shape is in v_probes, its spend in the sweep's totals).
WITH keys AS (
    SELECT sweep_id, trial_id FROM trials
    UNION
    SELECT sweep_id, trial_id FROM runs WHERE sweep_id IS NOT NULL AND coalesce(purpose, 'trial') = 'trial'
),
agg AS (
    SELECT sweep_id, trial_id,
           count(*) AS attempts,
           arg_max(status, (attempt, ended_at)) AS last_status,
           bool_or(status = 'succeeded') AS has_succeeded,
           -- the metric of the trial = objective metric of its (latest) succeeded run
           arg_max(metric_value, ended_at) FILTER (WHERE status = 'succeeded') AS metric_value,
           max(peak_gpu_mem_gib) AS peak_gpu_mem_gib,
           max(peak_rss_gib) AS peak_rss_gib,
           sum(wall_s) AS wall_s,
           sum(gpu_hours) AS gpu_hours,
           sum(cost_usd) AS cost_usd,
           min(started_at) AS started_at,
           max(ended_at) AS ended_at,
           sum(preemptions)::BIGINT AS preemptions
    FROM v_runs WHERE sweep_id IS NOT NULL AND purpose = 'trial'  -- probes: v_probes
    GROUP BY sweep_id, trial_id
)
SELECT k.sweep_id,
       s.name AS sweep_name,
       k.trial_id,
       t.trial_index,
       t.params,
       CASE WHEN a.has_succeeded THEN 'succeeded'
            WHEN t.status = 'running' THEN 'running'
            -- stopped by the adaptive search's pruner: its attempt was cancelled on purpose
            WHEN t.status = 'pruned' AND a.last_status = 'cancelled' THEN 'pruned'
            ELSE coalesce(a.last_status, t.status) END AS status,
       s.objective_metric AS metric_name,
       a.metric_value,
       a.peak_gpu_mem_gib,
       a.peak_rss_gib,
       a.wall_s,
       a.gpu_hours,
       coalesce(a.cost_usd, 0.0) AS cost_usd,
       coalesce(a.attempts, 0) AS attempts,
       coalesce(a.preemptions, 0) AS preemptions,
       a.started_at,
       a.ended_at,
       t.accelerator AS planned_accelerator,
       t.gpus AS planned_gpus,
       t.spot AS planned_spot,
       t.est_memory_gib,
       t.est_wall_s,
       t.est_cost_usd,
       t.feasible,
       t.reason,
       t.est_pruned_cost_usd,
       t.stop_rule
FROM keys k
LEFT JOIN trials t ON t.sweep_id = k.sweep_id AND t.trial_id = k.trial_id
LEFT JOIN sweeps s ON s.sweep_id = k.sweep_id
LEFT JOIN agg a ON a.sweep_id = k.sweep_id AND a.trial_id = k.trial_id
