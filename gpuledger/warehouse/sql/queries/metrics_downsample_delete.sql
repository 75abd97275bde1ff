-- Maintenance: the raw points of the staged series removed (replaced next by metrics_downsample_insert).
DELETE FROM metrics WHERE (run_id, name) IN (SELECT DISTINCT run_id, name FROM _gpuledger_downsample)
