-- Catalog vs bill for the ISO week [$week_start, $week_end): per cloud, region, instance type and
-- spot, the instance-hours and effective USD of the usage line items attributed to runs whose charge
-- period starts in the week (v_billed_usage). The report prices the same hours at the catalog rate.
SELECT cloud, region, instance_type, spot,
       count(DISTINCT run_id) AS runs,
       sum(billed_hours) AS billed_hours,
       sum(billed_hours * gpus) AS billed_gpu_hours,
       sum(effective_usd) AS effective_usd
FROM v_billed_usage
WHERE charge_period_start >= $week_start AND charge_period_start < $week_end
GROUP BY cloud, region, instance_type, spot
HAVING sum(billed_hours) > 0
ORDER BY effective_usd DESC, cloud, region, instance_type, spot
