-- The effective rate the bill shows per cloud, region, instance type and spot or not (v_billed_usage):
-- effective USD / billed instance-hours, and per GPU-hour of the runs' GPUs. The planner prices an
-- offer at usd_per_hour where billed_gpu_hours reaches prices.billed_min_gpu_hours (default 10).
SELECT cloud, region, instance_type, spot,
       count(DISTINCT run_id) AS runs,
       count(*) AS line_items,
       sum(billed_hours) AS billed_hours,
       sum(billed_hours * gpus) AS billed_gpu_hours,
       sum(effective_usd) AS effective_usd,
       sum(effective_usd) / sum(billed_hours) AS usd_per_hour,
       sum(effective_usd) / nullif(sum(billed_hours * gpus), 0) AS usd_per_gpu_hour,
       min(charge_period_start) AS first_charge_at,
       max(charge_period_end) AS last_charge_at
FROM v_billed_usage
GROUP BY cloud, region, instance_type, spot
HAVING sum(billed_hours) > 0
