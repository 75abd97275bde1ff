-- Waste (v_run_facts.wasted) of the runs that started in the ISO week [$week_start, $week_end), by
-- reason (the run's status); the week's range reaches the runs scan.
SELECT status AS reason, count(*) AS runs, sum(gpu_hours) AS gpu_hours, sum(cost_usd) AS cost_usd
FROM v_run_facts
WHERE started_at >= $week_start AND started_at < $week_end AND wasted
GROUP BY status
ORDER BY cost_usd DESC, reason
