-- The number of metric points stored (maintenance reports it before and after).
SELECT count(*) FROM metrics
