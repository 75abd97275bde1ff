-- One sweep's trials with their results (v_trial_results); the flow's results table artifact.
SELECT * FROM v_trial_results WHERE sweep_id = $sweep_id ORDER BY trial_index, trial_id
