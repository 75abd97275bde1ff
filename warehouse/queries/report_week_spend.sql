-- Spend of the ISO week [$week_start, $week_end) (gpuledger.weeks.week_bounds) by project, owner,
-- accelerator and spot, largest first: the rows of v_weekly_spend for that week. Reads runs and sweeps
-- with the week's range on runs.started_at (pruned by zone maps), where v_weekly_spend would compute
-- the week of every run and join each to its billing lines and final metric first (v_runs);
-- accelerator and gpu_hours as v_runs defines them (tests/test_report_weekly.py checks both agree).
SELECT strftime(r.started_at, '%G-W%V') AS week,
       date_trunc('week', r.started_at)::DATE AS week_start,
       coalesce(s.project, 'unattributed') AS project,
       coalesce(s.owner, 'unattributed') AS owner,
       CASE WHEN r.accelerator IS NULL AND r.gpus = 0 THEN 'cpu'
            ELSE coalesce(r.accelerator, 'unknown') END AS accelerator,
       r.spot,
       count(*) AS runs,
       sum(r.gpus * r.wall_s / 3600.0) AS gpu_hours,
       sum(r.wall_s) / 3600.0 AS wall_hours,
       sum(r.cost_usd) AS cost_usd
FROM runs r
LEFT JOIN sweeps s ON s.sweep_id = r.sweep_id
WHERE r.started_at >= $week_start AND r.started_at < $week_end
GROUP BY ALL
ORDER BY cost_usd DESC
