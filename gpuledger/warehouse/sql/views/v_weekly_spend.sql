-- Spend per ISO week (of each run's start, UTC), project, owner, accelerator and spot (v_run_facts:
-- no billing join, so the weekly report's filter on week_start stays cheap).
SELECT strftime(started_at, '%G-W%V') AS week,
       date_trunc('week', started_at)::DATE AS week_start,
       coalesce(project, 'unattributed') AS project,
       coalesce(owner, 'unattributed') AS owner,
       accelerator,
       spot,
       count(*) AS runs,
       sum(gpu_hours) AS gpu_hours,
       sum(wall_s) / 3600.0 AS wall_hours,
       sum(cost_usd) AS cost_usd
FROM v_run_facts
GROUP BY ALL
