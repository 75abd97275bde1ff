-- The ISO weeks that have runs (the week of each run's start, as v_weekly_spend), newest first,
-- with their runs and spend.
SELECT week, sum(runs) AS runs, sum(cost_usd) AS cost_usd
FROM v_weekly_spend
WHERE week IS NOT NULL
GROUP BY week
ORDER BY week DESC
