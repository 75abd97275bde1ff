-- Estimated against measured memory and time, per run of a sweep.
SELECT * FROM v_estimate_accuracy WHERE sweep_id = $sweep_id ORDER BY trial_id, run_id
