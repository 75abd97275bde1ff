-- One sweep's ($sweep_id) probe runs and what each measured (v_probes), in start order.
SELECT run_id, trial_id, probe_shape, status, steps, startup_s, tokens_per_s, step_s, tokens_source, memory_gib,
       peak_rss_gib, peak_gpu_mem_gib, torch_allocated_gib, torch_reserved_gib, wall_s, cost_usd, usable, ended_at
FROM v_probes
WHERE sweep_id = $sweep_id
ORDER BY started_at, run_id
