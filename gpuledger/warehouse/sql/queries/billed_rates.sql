-- The rates learned from the bill, for the planner (gpuledger.inputs.ledger.billed_rates).
SELECT cloud, region, instance_type, spot, runs, line_items, billed_hours, billed_gpu_hours, effective_usd,
       usd_per_hour, usd_per_gpu_hour, first_charge_at, last_charge_at
FROM v_billed_rates
ORDER BY cloud, region, instance_type, spot
