-- The runs (v_runs: one row per attempt, with cost and objective metric), newest first; each filter
-- applies when its parameter is not NULL: $sweep (a sweep id or name), $purpose ('trial' | 'probe').
SELECT *
FROM v_runs
WHERE ($sweep IS NULL OR sweep_id = $sweep OR sweep_name = $sweep)
  AND ($purpose IS NULL OR purpose = $purpose)
ORDER BY started_at DESC
LIMIT $limit
