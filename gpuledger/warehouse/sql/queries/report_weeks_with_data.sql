-- The ISO weeks that have runs (the week of each run's start, UTC: the rule of v_weekly_spend), newest
-- first, with their runs and spend. Reads `runs` alone: v_weekly_spend would first join every run to
-- its sweep, billing lines and final metric (v_runs) for the two columns this needs.
SELECT strftime(started_at, '%G-W%V') AS week, count(*) AS runs, sum(cost_usd) AS cost_usd
FROM runs
WHERE started_at IS NOT NULL
GROUP BY week
ORDER BY week DESC
