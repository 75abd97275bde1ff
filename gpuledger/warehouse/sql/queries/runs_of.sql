-- The runs (v_runs: one row per attempt, with cost and objective metric), newest first; each filter
-- applies when its parameter is not NULL: $sweep (a sweep id or name), $purpose ('trial' | 'probe').
-- final_metrics: the run's last value of every metric it reported, as one JSON object {name: value}.
SELECT v.*,
       (SELECT json_group_object(f.name, f.value) FROM final_metrics f WHERE f.run_id = v.run_id) AS final_metrics
FROM v_runs v
WHERE ($sweep IS NULL OR v.sweep_id = $sweep OR v.sweep_name = $sweep)
  AND ($purpose IS NULL OR v.purpose = $purpose)
ORDER BY v.started_at DESC
LIMIT $limit
