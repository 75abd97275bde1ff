-- The last value of each metric run $run_id reported (the record's final_metrics), by name.
SELECT name, value FROM final_metrics WHERE run_id = $run_id ORDER BY name
