-- Per sweep, the runs that started in ISO week $week (the rule of v_weekly_spend): runs, succeeded
-- trials, cost, waste (failed, oom, preempted, cancelled) and GPU-hours.
SELECT sweep_id, any_value(sweep_name) AS sweep_name, any_value(project) AS project,
       any_value(owner) AS owner, count(*) AS runs,
       count(DISTINCT trial_id) FILTER (WHERE status = 'succeeded') AS succeeded_trials,
       sum(cost_usd) AS cost_usd,
       coalesce(sum(cost_usd) FILTER (WHERE status IN ('failed', 'oom', 'preempted', 'cancelled')), 0.0) AS waste_usd,
       sum(gpu_hours) AS gpu_hours
FROM v_runs
WHERE strftime(started_at, '%G-W%V') = $week
GROUP BY sweep_id
ORDER BY cost_usd DESC, sweep_id
