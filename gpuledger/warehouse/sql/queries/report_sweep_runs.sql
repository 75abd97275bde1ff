-- A sweep's runs on its timeline (offsets from the sweep start) with preemptions, GPUs and reason, and a
-- failed run's last stderr lines and log path (why it failed), and a packed run's slot, share, k and job wall.
SELECT t.run_id, t.trial_id, t.attempt, t.status, t.accelerator, t.spot, t.started_at, t.ended_at,
       t.start_offset_s, t.end_offset_s, t.wall_s, t.cost_usd, t.cumulative_cost_usd,
       t.metric_value, t.best_so_far, r.preemptions, r.gpus, r.reason,
       r.stderr_tail, r.log_path, r.pack_slot, r.pack_share, r.pack_k, r.pack_wall_s
FROM v_trial_timeline t JOIN v_runs r ON r.run_id = t.run_id
WHERE t.sweep_id = $sweep_id
ORDER BY t.started_at, t.run_id
