-- Which of the run ids (registered as _in_ids) are stored (a sweep in service mode waits for its own).
SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM _in_ids)
