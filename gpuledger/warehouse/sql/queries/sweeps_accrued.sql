-- Each sweep's running (or waiting) state with its measured and accrued spend (gpuledger status, /metrics).
-- A running attempt's spend is read up to $now: its last written accrual plus its price for the time since
-- that write (at most 180 s: a sweep that stopped writing, killed, does not grow without end).
WITH running AS (
    SELECT sweep_id, trial_id, usd_per_hour, over_estimate,
           accrued_usd + usd_per_hour * least(greatest(epoch($now::TIMESTAMP) - epoch(updated_at), 0), 180) / 3600.0
               AS accrued_usd
    FROM trial_accruals
    WHERE running
),
per_sweep AS (
    SELECT sweep_id, sum(accrued_usd) AS running_accrued_usd, count(*) AS running_trials,
           sum(usd_per_hour) AS usd_per_hour, count(*) FILTER (WHERE over_estimate) AS over_estimate_trials
    FROM running
    GROUP BY sweep_id
)
SELECT s.sweep_id, s.name, s.status, s.started_at, s.ended_at, s.budget_usd,
       coalesce((SELECT sum(r.cost_usd) FROM runs r WHERE r.sweep_id = s.sweep_id), 0) AS measured_usd,
       (SELECT count(*) FROM runs r WHERE r.sweep_id = s.sweep_id) AS runs,
       coalesce(p.running_accrued_usd, 0) AS running_accrued_usd,
       coalesce(p.running_trials, 0) AS running_trials,
       coalesce(p.usd_per_hour, 0) AS usd_per_hour,
       coalesce(p.over_estimate_trials, 0) AS over_estimate_trials
FROM sweeps s
LEFT JOIN per_sweep p ON p.sweep_id = s.sweep_id
WHERE $sweep IS NULL OR s.sweep_id = $sweep OR s.name = $sweep
ORDER BY s.started_at DESC NULLS LAST
