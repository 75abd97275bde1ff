-- Each sweep's running (or waiting) state with its measured and accrued spend (gpuledger status).
SELECT s.sweep_id, s.name, s.status, s.started_at, s.budget_usd,
       coalesce((SELECT sum(r.cost_usd) FROM runs r WHERE r.sweep_id = s.sweep_id), 0) AS measured_usd,
       coalesce((SELECT sum(a.accrued_usd) FROM trial_accruals a WHERE a.sweep_id = s.sweep_id AND a.running), 0)
           AS running_accrued_usd,
       coalesce((SELECT count(*) FROM trial_accruals a WHERE a.sweep_id = s.sweep_id AND a.running), 0) AS running_trials,
       coalesce((SELECT sum(a.usd_per_hour) FROM trial_accruals a WHERE a.sweep_id = s.sweep_id AND a.running), 0)
           AS usd_per_hour,
       coalesce((SELECT count(*) FROM trial_accruals a WHERE a.sweep_id = s.sweep_id AND a.running AND a.over_estimate), 0)
           AS over_estimate_trials
FROM sweeps s
WHERE $sweep IS NULL OR s.sweep_id = $sweep OR s.name = $sweep
ORDER BY s.started_at DESC NULLS LAST
