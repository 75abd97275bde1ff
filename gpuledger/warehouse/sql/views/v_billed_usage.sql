-- Every FOCUS usage line item attributed to a cloud run, with the run's offer (cloud, region,
-- instance type, spot, GPUs), the instance-hours it bills and its effective cost: what the rates
-- learned from the bill are made of (v_billed_rates; gpuledger/catalog/pricing.py).
-- Hours: ConsumedQuantity when ConsumedUnit is hours, else PricingQuantity when PricingUnit is
-- hours, else the charge period's length. Cost: EffectiveCost (after discounts and amortised
-- commitments, FOCUS 1.x), else BilledCost (v_billing_attribution.effective_cost). Only USD usage of Compute (or no ServiceCategory);
-- a line attributed by time overlap alone (a guess) counts only where its text names the run's
-- instance type (ChargeDescription, ResourceId/Name/Type, SkuMeter, SkuPriceDetails).
SELECT a.file_sha256, a.source_row, a.run_id, a.sweep_id, a.trial_id, a.attribution_method,
       r.cloud, r.region, r.instance_type, r.spot, r.gpus, r.accelerator,
       a.charge_period_start, a.charge_period_end,
       CASE WHEN lower(li.consumed_unit) IN ('hour', 'hours', 'hr', 'hrs', 'h') AND li.consumed_quantity > 0
                THEN li.consumed_quantity
            WHEN lower(li.pricing_unit) IN ('hour', 'hours', 'hr', 'hrs', 'h') AND li.pricing_quantity > 0
                THEN li.pricing_quantity
            ELSE (epoch(a.charge_period_end) - epoch(a.charge_period_start)) / 3600.0
       END AS billed_hours,
       a.effective_cost AS effective_usd
FROM v_billing_attribution a
JOIN billing_line_items li USING (file_sha256, source_row)
JOIN runs r ON r.run_id = a.run_id
WHERE a.charge_category = 'Usage'
  AND a.billing_currency = 'USD'
  AND r.launcher <> 'local'
  AND r.instance_type IS NOT NULL
  AND coalesce(li.service_category, 'Compute') = 'Compute'
  AND (a.attribution_method IN ('tags', 'resource')
       OR contains(lower(concat_ws(' ', li.charge_description, li.resource_id, li.resource_name, li.resource_type,
                                   li.sku_meter, li.sku_price_details)),
                   lower(r.instance_type)))
