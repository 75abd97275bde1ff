-- The ISO weeks that have data, newest first (the product's report_weeks_with_data: runs by the week of their
-- start, billed line items by the week their charge period starts, UTC), with their runs and spend and their
-- line items and USD billed, found the way before the push-down: whole views (v_weekly_spend,
-- v_billing_attribution) grouped by strftime(ts, '%G-W%V').
WITH r AS (
    SELECT week, sum(runs) AS runs, sum(cost_usd) AS cost_usd
    FROM v_weekly_spend
    WHERE week IS NOT NULL
    GROUP BY week
),
b AS (
    SELECT strftime(charge_period_start, '%G-W%V') AS week, count(*) AS billed_line_items,
           sum(billed_cost) FILTER (WHERE billing_currency = 'USD') AS billed_usd
    FROM v_billing_attribution
    WHERE charge_period_start IS NOT NULL
    GROUP BY week
)
SELECT week, coalesce(r.runs, 0) AS runs, CASE WHEN r.week IS NULL THEN 0 ELSE r.cost_usd END AS cost_usd,
       coalesce(b.billed_line_items, 0) AS billed_line_items, b.billed_usd
FROM r FULL OUTER JOIN b USING (week)
ORDER BY week DESC
