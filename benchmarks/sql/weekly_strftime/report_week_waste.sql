-- Waste (v_run_facts.wasted) of the runs that started in ISO week $week, by reason: v_run_facts filtered by
-- strftime(started_at, '%G-W%V') = $week, as before the push-down.
SELECT status AS reason, count(*) AS runs, sum(gpu_hours) AS gpu_hours, sum(cost_usd) AS cost_usd
FROM v_run_facts
WHERE strftime(started_at, '%G-W%V') = $week AND wasted
GROUP BY status
ORDER BY cost_usd DESC, reason
