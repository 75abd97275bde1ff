-- Estimated vs measured memory and time per run (the planner's estimate of the run's trial).
-- Measured memory: peak GPU memory (NVML, device level) for GPU runs, peak RSS for CPU runs.
-- Positive error = overestimate.
SELECT r.run_id,
       r.sweep_id,
       r.trial_id,
       r.status,
       r.accelerator,
       r.gpus,
       t.est_memory_gib,
       CASE WHEN r.gpus > 0 THEN r.peak_gpu_mem_gib ELSE r.peak_rss_gib END AS measured_memory_gib,
       CASE WHEN (CASE WHEN r.gpus > 0 THEN r.peak_gpu_mem_gib ELSE r.peak_rss_gib END) > 0
            THEN 100.0 * (t.est_memory_gib - (CASE WHEN r.gpus > 0 THEN r.peak_gpu_mem_gib ELSE r.peak_rss_gib END))
                 / (CASE WHEN r.gpus > 0 THEN r.peak_gpu_mem_gib ELSE r.peak_rss_gib END) END AS memory_err_pct,
       t.est_wall_s,
       r.wall_s,
       CASE WHEN r.status = 'succeeded' AND r.wall_s > 0
            THEN 100.0 * (t.est_wall_s - r.wall_s) / r.wall_s END AS time_err_pct
FROM v_runs r
JOIN trials t ON t.sweep_id = r.sweep_id AND t.trial_id = r.trial_id
WHERE r.purpose = 'trial'  -- a probe ran a few steps of the trial, not the trial
