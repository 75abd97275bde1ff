-- The stored runs rows of the run ids being ingested (registered as _in_ids): an ingest compares a
-- record reusing a stored run id with what is stored, and refuses it unless it is the same.
SELECT * EXCLUDE (ingested_at) FROM runs WHERE run_id IN (SELECT run_id FROM _in_ids) ORDER BY run_id
