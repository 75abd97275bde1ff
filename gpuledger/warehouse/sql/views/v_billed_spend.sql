-- The bill, per billing period, provider, billing account and currency. USD columns sum
-- USD line items only: other currencies stay in billed_cost/effective_cost/list_cost with their
-- billing_currency and are never added to USD without a stated rate. Effective cost is
-- v_billing_attribution's: EffectiveCost, else BilledCost (effective_cost_assumed_rows).
-- The USD effective cost splits in three, adding up to effective_cost_usd: attributed_usd (line items matching a
-- run, a credit naming that run's resource included: it is that run's), unattributed_usd (charges matching no
-- run: idle clusters, storage, tax) and unattributed_credits_usd (ChargeCategory Credit matching no run), so a
-- credit never nets unattributed spend down to little or below zero. credits_usd: every USD credit.
SELECT billing_period_start,
       coalesce(provider_name, 'unknown') AS provider,
       billing_account_id,
       billing_currency,
       count(*) AS line_items,
       sum(billed_cost) AS billed_cost,
       sum(effective_cost) AS effective_cost,
       sum(list_cost) AS list_cost,
       sum(billed_cost) FILTER (WHERE billing_currency = 'USD') AS billed_cost_usd,
       sum(effective_cost) FILTER (WHERE billing_currency = 'USD') AS effective_cost_usd,
       sum(list_cost) FILTER (WHERE billing_currency = 'USD') AS list_cost_usd,
       coalesce(sum(effective_cost) FILTER (WHERE billing_currency = 'USD' AND run_id IS NOT NULL), 0) AS attributed_usd,
       coalesce(sum(effective_cost) FILTER (WHERE billing_currency = 'USD' AND run_id IS NULL
                                         AND charge_category IS DISTINCT FROM 'Credit'), 0) AS unattributed_usd,
       coalesce(sum(effective_cost) FILTER (WHERE billing_currency = 'USD' AND run_id IS NULL
                                         AND charge_category = 'Credit'), 0) AS unattributed_credits_usd,
       coalesce(sum(effective_cost) FILTER (WHERE billing_currency = 'USD' AND charge_category = 'Credit'), 0) AS credits_usd,
       count(*) FILTER (WHERE charge_category = 'Credit') AS credit_line_items,
       count(*) FILTER (WHERE attribution_method = 'time') AS attributed_by_time,
       count(*) FILTER (WHERE currency_assumed) AS currency_assumed_rows,
       count(*) FILTER (WHERE effective_cost_assumed) AS effective_cost_assumed_rows,
       count(*) FILTER (WHERE charge_class = 'Correction') AS corrections
FROM v_billing_attribution
GROUP BY ALL
