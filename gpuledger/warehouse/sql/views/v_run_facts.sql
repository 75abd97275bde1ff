-- One row per attempt with its sweep's attribution and the run-level facts derived from the row
-- itself (and its trial's status): the one definition of a run's accelerator label, GPU-hours and
-- whether its spend produced no result (a cancelled run of a trial the adaptive search pruned is the
-- search's saving, not waste: `pruned`). No aggregation and no billing or metric join, so a filter on started_at (the weekly
-- report's week range) reaches the runs scan; v_runs adds the billing lines and the objective.
-- purpose: 'trial' (an attempt of a trial) or 'probe' (a short measuring run, docs/probes.md).
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
       r.status,
       r.status IN ('failed', 'oom', 'preempted', 'cancelled')
           AND NOT (r.status = 'cancelled' AND coalesce(t.status = 'pruned', false)) AS wasted,
       (r.status = 'cancelled' AND coalesce(t.status = 'pruned', false)) AS pruned,
       r.reason,
       r.exit_code,
       r.peak_gpu_mem_gib,
       r.peak_rss_gib,
       r.preemptions,
       r.recoveries,
       r.cost_usd,
       s.objective_metric AS metric_name,
       r.params,
       coalesce(r.purpose, 'trial') AS purpose,
       r.probe_shape,
       r.stderr_tail,
       r.log_path,
       r.pack_slot,
       r.pack_share,
       r.pack_k,
       r.pack_wall_s
FROM runs r
LEFT JOIN sweeps s ON s.sweep_id = r.sweep_id
LEFT JOIN trials t ON t.sweep_id = r.sweep_id AND t.trial_id = r.trial_id
