-- A trial's record was stored: its attempts stop accruing (the runs row counts from now on).
UPDATE trial_accruals SET running = false WHERE sweep_id = $sweep_id AND trial_id = $trial_id AND running
