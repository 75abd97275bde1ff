-- Which of the given sweep ids are registered (ingest refuses records of unknown sweeps).
SELECT sweep_id FROM sweeps WHERE list_contains($sweep_ids, sweep_id)
