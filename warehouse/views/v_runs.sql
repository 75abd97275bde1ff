-- One row per attempt, with its sweep's attribution, cost and objective metric.
-- Accelerator: 'cpu' for a CPU-only run (gpus = 0 and no accelerator recorded).
WITH bill AS (
    SELECT run_id,
           sum(hours) AS billed_hours,
           -- on-demand equivalent: spot lines at their on-demand price (their own price when
           -- that is unknown, i.e. no saving claimed); on-demand lines at what they cost
           sum(CASE WHEN spot THEN hours * coalesce(on_demand_usd_per_hour, usd_per_hour)
                    ELSE cost_usd END) AS on_demand_equiv_usd
    FROM billing GROUP BY run_id
)
SELECT r.run_id,
       r.sweep_id,
       s.name AS sweep_name,
       s.project,
       s.owner,
       r.trial_id,
       r.attempt,
       r.launcher,
       r.cloud,
       r.region,
       r.instance_type,
       CASE WHEN r.accelerator IS NULL AND r.gpus = 0 THEN 'cpu'
            ELSE coalesce(r.accelerator, 'unknown') END AS accelerator,
       r.gpus,
       r.spot,
       r.started_at,
       r.ended_at,
       r.wall_s,
       r.gpus * r.wall_s / 3600.0 AS gpu_hours,
       coalesce(b.billed_hours, 0.0) AS billed_hours,
       r.status,
       r.reason,
       r.exit_code,
       r.peak_gpu_mem_gib,
       r.peak_rss_gib,
       r.preemptions,
       r.recoveries,
       r.cost_usd,
       coalesce(b.on_demand_equiv_usd, r.cost_usd) AS on_demand_equiv_usd,
       s.objective_metric AS metric_name,
       fm.value AS metric_value,
       r.params
FROM runs r
LEFT JOIN sweeps s ON s.sweep_id = r.sweep_id
LEFT JOIN bill b ON b.run_id = r.run_id
LEFT JOIN final_metrics fm ON fm.run_id = r.run_id AND fm.name = s.objective_metric
