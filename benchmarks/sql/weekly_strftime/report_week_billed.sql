-- The bill of ISO week $week, per currency: the product's report_week_billed (the same columns: charges and
-- credits matching no run apart, line items without EffectiveCost counted) over v_billing_attribution
-- filtered by strftime(charge_period_start, '%G-W%V') = $week, as before the push-down.
SELECT billing_currency,
       count(*) AS line_items,
       count(DISTINCT file_sha256) AS exports,
       sum(billed_cost) AS billed_cost,
       sum(effective_cost) AS effective_cost,
       sum(list_cost) AS list_cost,
       coalesce(sum(billed_cost) FILTER (WHERE run_id IS NOT NULL), 0) AS attributed_billed_cost,
       coalesce(sum(effective_cost) FILTER (WHERE run_id IS NOT NULL), 0) AS attributed_effective_cost,
       count(*) FILTER (WHERE run_id IS NOT NULL) AS attributed_line_items,
       coalesce(sum(effective_cost) FILTER (WHERE run_id IS NOT NULL AND charge_category = 'Credit'), 0)
           AS attributed_credit_effective_cost,
       count(*) FILTER (WHERE run_id IS NOT NULL AND charge_category = 'Credit') AS attributed_credit_line_items,
       coalesce(sum(billed_cost) FILTER (WHERE run_id IS NULL AND charge_category IS DISTINCT FROM 'Credit'), 0)
           AS unattributed_billed_cost,
       coalesce(sum(effective_cost) FILTER (WHERE run_id IS NULL AND charge_category IS DISTINCT FROM 'Credit'), 0)
           AS unattributed_effective_cost,
       count(*) FILTER (WHERE run_id IS NULL AND charge_category IS DISTINCT FROM 'Credit') AS unattributed_line_items,
       coalesce(sum(billed_cost) FILTER (WHERE run_id IS NULL AND charge_category = 'Credit'), 0)
           AS unattributed_credit_billed_cost,
       coalesce(sum(effective_cost) FILTER (WHERE run_id IS NULL AND charge_category = 'Credit'), 0)
           AS unattributed_credit_effective_cost,
       count(*) FILTER (WHERE run_id IS NULL AND charge_category = 'Credit') AS unattributed_credit_line_items,
       count(*) FILTER (WHERE attribution_method = 'time') AS attributed_by_time,
       count(*) FILTER (WHERE charge_period_end > date_trunc('week', charge_period_start) + INTERVAL 7 DAY)
           AS spanning_past_week,
       count(*) FILTER (WHERE currency_assumed) AS currency_assumed_line_items,
       count(*) FILTER (WHERE effective_cost_assumed) AS effective_cost_assumed_line_items
FROM v_billing_attribution
WHERE strftime(charge_period_start, '%G-W%V') = $week
GROUP BY billing_currency
ORDER BY billing_currency = 'USD' DESC, billing_currency
