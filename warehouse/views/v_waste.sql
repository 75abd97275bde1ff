-- Spend that produced no result, per sweep and reason (the run's status).
SELECT sweep_id,
       status AS reason,
       count(*) AS runs,
       sum(wall_s) AS wall_s,
       sum(gpu_hours) AS gpu_hours,
       sum(cost_usd) AS cost_usd
FROM v_runs
WHERE sweep_id IS NOT NULL AND status IN ('failed', 'oom', 'preempted', 'cancelled')
GROUP BY sweep_id, status
