-- Per sweep, the runs that started in ISO week $week (the rule of v_weekly_spend): runs, succeeded
-- trials, cost, waste (v_run_facts.wasted) and GPU-hours, filtered by strftime(started_at, '%G-W%V') = $week.
SELECT r.sweep_id, any_value(r.sweep_name) AS sweep_name, any_value(r.project) AS project,
       any_value(r.owner) AS owner, count(*) AS runs,
       count(DISTINCT r.trial_id) FILTER (WHERE r.status = 'succeeded') AS succeeded_trials,
       sum(r.cost_usd) AS cost_usd,
       coalesce(sum(r.cost_usd) FILTER (WHERE r.wasted), 0.0) AS waste_usd,
       sum(r.gpu_hours) AS gpu_hours
FROM v_run_facts r
WHERE strftime(r.started_at, '%G-W%V') = $week
GROUP BY r.sweep_id
ORDER BY cost_usd DESC, r.sweep_id
