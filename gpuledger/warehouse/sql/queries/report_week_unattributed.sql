-- The line items of the ISO week [$week_start, $week_end) (charge period starting in it) that match
-- no run, largest effective cost first: idle clusters, forgotten instances, storage, commitments, tax.
SELECT billing_currency, charge_category, charge_class, provider_name, service_name, resource_id,
       charge_period_start, charge_period_end, billed_cost, effective_cost, export_name, source_row
FROM v_billing_attribution
WHERE charge_period_start >= $week_start AND charge_period_start < $week_end AND run_id IS NULL
ORDER BY abs(effective_cost) DESC NULLS LAST, billed_cost DESC NULLS LAST, export_name, source_row
