-- Trial ids of a sweep that already succeeded (a trial's run, not a probe; or the trial's own status).
SELECT trial_id FROM runs WHERE sweep_id = $sweep_id AND status = 'succeeded' AND coalesce(purpose, 'trial') = 'trial'
UNION SELECT trial_id FROM trials WHERE sweep_id = $sweep_id AND status = 'succeeded'
