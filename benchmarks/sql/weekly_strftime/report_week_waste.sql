-- Waste of the runs that started in ISO week $week, by reason.
SELECT status AS reason, count(*) AS runs, sum(gpu_hours) AS gpu_hours, sum(cost_usd) AS cost_usd
FROM v_runs
WHERE strftime(started_at, '%G-W%V') = $week AND status IN ('failed', 'oom', 'preempted', 'cancelled')
GROUP BY status
ORDER BY cost_usd DESC, reason
