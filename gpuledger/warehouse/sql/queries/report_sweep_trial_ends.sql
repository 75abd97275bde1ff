-- Every run of one sweep ($sweep_id) at the moment it ended, for the adaptive report's progress
-- charts: its offset from the sweep start and the cumulative spend then (v_trial_timeline), its
-- final objective value (succeeded runs), the trial's status (v_trial_results: `pruned` for a trial
-- the search stopped) and the last objective value it reported (metrics) with how many it reported.
WITH last AS (
    SELECT m.run_id, arg_max(m.value, m.seq) AS last_value, count(*) AS values_reported
    FROM metrics m
    JOIN runs r ON r.run_id = m.run_id
    JOIN sweeps s ON s.sweep_id = r.sweep_id
    WHERE r.sweep_id = $sweep_id AND coalesce(r.purpose, 'trial') = 'trial' AND m.name = s.objective_metric AND m.value IS NOT NULL
    GROUP BY m.run_id
)
SELECT t.run_id, t.trial_id, t.attempt, t.status AS run_status, tr.status AS trial_status,
       t.end_offset_s, t.wall_s, t.cost_usd, t.cumulative_cost_usd, t.metric_value, t.best_so_far,
       l.last_value, coalesce(l.values_reported, 0) AS values_reported
FROM v_trial_timeline t
LEFT JOIN last l ON l.run_id = t.run_id
LEFT JOIN v_trial_results tr ON tr.sweep_id = t.sweep_id AND tr.trial_id = t.trial_id
WHERE t.sweep_id = $sweep_id
ORDER BY t.ended_at, t.run_id
