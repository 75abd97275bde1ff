-- How many of the run ids being ingested (registered as _in_ids) are already stored.
SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM _in_ids)
