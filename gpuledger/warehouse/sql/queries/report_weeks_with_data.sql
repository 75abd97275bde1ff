-- The ISO weeks that have data, newest first: runs (the week of each run's start, UTC: the rule of
-- v_weekly_spend) or billed line items (the week their charge period starts, UTC: the rule of
-- report_week_billed), with their runs and estimated spend and their line items and USD billed (other
-- currencies are never added: billed_usd is null for a week billed only in those). Reads the tables
-- `runs` and `billing_line_items` alone: v_weekly_spend would first join every run to its sweep,
-- billing lines and final metric (v_runs) for the two columns this needs.
WITH r AS (
    SELECT strftime(started_at, '%G-W%V') AS week, count(*) AS runs, sum(cost_usd) AS cost_usd
    FROM runs
    WHERE started_at IS NOT NULL
    GROUP BY week
),
b AS (
    SELECT strftime(charge_period_start, '%G-W%V') AS week, count(*) AS billed_line_items,
           sum(billed_cost) FILTER (WHERE billing_currency = 'USD') AS billed_usd
    FROM billing_line_items
    WHERE charge_period_start IS NOT NULL
    GROUP BY week
)
SELECT week, coalesce(r.runs, 0) AS runs, CASE WHEN r.week IS NULL THEN 0 ELSE r.cost_usd END AS cost_usd,
       coalesce(b.billed_line_items, 0) AS billed_line_items, b.billed_usd
FROM r FULL OUTER JOIN b USING (week)
ORDER BY week DESC
