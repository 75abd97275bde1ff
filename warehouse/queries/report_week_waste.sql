-- Waste of the runs that started in the ISO week [$week_start, $week_end), by reason. Reads `runs`
-- (the week's range pruned by zone maps); gpu_hours as v_runs defines it.
SELECT status AS reason, count(*) AS runs, sum(gpus * wall_s / 3600.0) AS gpu_hours, sum(cost_usd) AS cost_usd
FROM runs
WHERE started_at >= $week_start AND started_at < $week_end
  AND status IN ('failed', 'oom', 'preempted', 'cancelled')
GROUP BY status
ORDER BY cost_usd DESC, reason
