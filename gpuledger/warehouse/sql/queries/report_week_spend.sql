-- Spend of the ISO week [$week_start, $week_end) (gpuledger.report.weeks.week_bounds) by project, owner,
-- accelerator and spot, largest first: the rows of v_weekly_spend for that week (the filter on its
-- group key reaches the runs scan of v_run_facts; no billing or metric join is read).
SELECT *
FROM v_weekly_spend
WHERE week_start >= CAST($week_start AS DATE) AND week_start < CAST($week_end AS DATE)
ORDER BY cost_usd DESC
