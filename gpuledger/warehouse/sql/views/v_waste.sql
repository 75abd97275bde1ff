-- Spend that produced no result, per sweep and reason (the run's status).
SELECT sweep_id,
       status AS reason,
       count(*) AS runs,
       sum(wall_s) AS wall_s,
       sum(gpu_hours) AS gpu_hours,
       sum(cost_usd) AS cost_usd
FROM v_run_facts
WHERE sweep_id IS NOT NULL AND wasted
GROUP BY sweep_id, status
