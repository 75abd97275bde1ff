-- Per sweep, the runs that started in the ISO week [$week_start, $week_end) (the rule of
-- v_weekly_spend): runs, succeeded trials, cost, waste (failed, oom, preempted, cancelled) and
-- GPU-hours. Reads runs and sweeps (the week's range pruned by zone maps), not v_runs, whose billing
-- and final-metric joins would read every run's rows; gpu_hours as v_runs defines it.
SELECT r.sweep_id, any_value(s.name) AS sweep_name, any_value(s.project) AS project,
       any_value(s.owner) AS owner, count(*) AS runs,
       count(DISTINCT r.trial_id) FILTER (WHERE r.status = 'succeeded') AS succeeded_trials,
       sum(r.cost_usd) AS cost_usd,
       coalesce(sum(r.cost_usd) FILTER (WHERE r.status IN ('failed', 'oom', 'preempted', 'cancelled')), 0.0) AS waste_usd,
       sum(r.gpus * r.wall_s / 3600.0) AS gpu_hours
FROM runs r
LEFT JOIN sweeps s ON s.sweep_id = r.sweep_id
WHERE r.started_at >= $week_start AND r.started_at < $week_end
GROUP BY r.sweep_id
ORDER BY cost_usd DESC, r.sweep_id
