-- Trial ids of a sweep that already succeeded (a run, or the trial's own status).
SELECT trial_id FROM runs WHERE sweep_id = $sweep_id AND status = 'succeeded'
UNION SELECT trial_id FROM trials WHERE sweep_id = $sweep_id AND status = 'succeeded'
