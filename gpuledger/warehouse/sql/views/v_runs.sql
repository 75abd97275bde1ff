-- One row per attempt, with its sweep's attribution, cost and objective metric: v_run_facts (the
-- run-level facts: accelerator label, GPU-hours, ...) with the run's billing lines and final metric.
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
       r.sweep_name,
       r.project,
       r.owner,
       r.trial_id,
       r.attempt,
       r.launcher,
       r.cloud,
       r.region,
       r.instance_type,
       r.accelerator,
       r.gpus,
       r.spot,
       r.started_at,
       r.ended_at,
       r.wall_s,
       r.gpu_hours,
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
       r.metric_name,
       fm.value AS metric_value,
       r.params,
       r.purpose,
       r.stderr_tail,
       r.log_path,
       r.pack_slot,
       r.pack_share,
       r.pack_k,
       r.pack_wall_s
FROM v_run_facts r
LEFT JOIN bill b ON b.run_id = r.run_id
LEFT JOIN final_metrics fm ON fm.run_id = r.run_id AND fm.name = r.metric_name
