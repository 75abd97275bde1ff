-- A sweep's trials in launch order.
SELECT * FROM v_trial_results WHERE sweep_id = $sweep_id
ORDER BY trial_index NULLS LAST, started_at NULLS LAST, trial_id
