-- Per run: the catalog estimate the launcher recorded against what the bill says (USD line items).
SELECT r.run_id, r.sweep_id, r.trial_id, r.launcher, r.cloud, r.accelerator, r.started_at,
       r.cost_usd AS estimated_usd,
       sum(a.billed_cost) FILTER (WHERE a.billing_currency = 'USD') AS billed_usd,
       sum(a.effective_cost) FILTER (WHERE a.billing_currency = 'USD') AS effective_usd,
       count(a.source_row) AS line_items,
       string_agg(DISTINCT a.attribution_method, ',' ORDER BY a.attribution_method) AS attribution_methods
FROM runs r
LEFT JOIN v_billing_attribution a ON a.run_id = r.run_id
GROUP BY ALL
