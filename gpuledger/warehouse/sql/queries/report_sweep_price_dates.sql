-- The dates of the catalog prices a sweep's plan used.
SELECT DISTINCT as_of FROM prices WHERE sweep_id = $sweep_id AND as_of IS NOT NULL ORDER BY 1
