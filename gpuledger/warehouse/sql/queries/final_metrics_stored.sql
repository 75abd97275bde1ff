-- The stored final metrics of the run ids being ingested (registered as _in_ids).
SELECT run_id, name, value FROM final_metrics WHERE run_id IN (SELECT run_id FROM _in_ids) ORDER BY run_id, name
