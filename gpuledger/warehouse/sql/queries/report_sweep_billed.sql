-- One sweep's estimated (catalog) vs billed vs effective cost (v_sweep_billed: USD line items), how
-- its line items were matched to its runs, and how many are in another currency (never summed). The USD
-- credits (ChargeCategory Credit) matched to its runs are inside billed/effective; credit_* say how much.
-- effective_cost_assumed_line_items: its USD line items without EffectiveCost, counted in effective_usd at
-- their BilledCost (v_billing_attribution.effective_cost_assumed).
SELECT s.sweep_id, s.estimated_usd, s.billed_usd, s.effective_usd, s.runs, s.runs_billed,
       s.estimated_usd_of_billed_runs, a.line_items, a.other_currency_line_items, a.attribution_methods,
       a.credit_line_items, a.credit_billed_usd, a.credit_effective_usd, a.effective_cost_assumed_line_items
FROM v_sweep_billed s
LEFT JOIN (SELECT sweep_id, count(*) AS line_items,
                  count(*) FILTER (WHERE billing_currency IS DISTINCT FROM 'USD') AS other_currency_line_items,
                  string_agg(DISTINCT attribution_method, ', ' ORDER BY attribution_method) AS attribution_methods,
                  count(*) FILTER (WHERE billing_currency = 'USD' AND charge_category = 'Credit') AS credit_line_items,
                  sum(billed_cost) FILTER (WHERE billing_currency = 'USD' AND charge_category = 'Credit')
                      AS credit_billed_usd,
                  sum(effective_cost) FILTER (WHERE billing_currency = 'USD' AND charge_category = 'Credit')
                      AS credit_effective_usd,
                  count(*) FILTER (WHERE billing_currency = 'USD' AND effective_cost_assumed)
                      AS effective_cost_assumed_line_items
           FROM v_billing_attribution
           WHERE sweep_id = $sweep_id
           GROUP BY sweep_id) a USING (sweep_id)
WHERE s.sweep_id = $sweep_id
