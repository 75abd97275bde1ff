-- The planned trials of the given sweeps (ingest refuses records of trials a sweep did not plan).
SELECT sweep_id, trial_id FROM trials WHERE list_contains($sweep_ids, sweep_id)
