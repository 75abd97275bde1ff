-- The trials of every grid sweep of the same experiment as $sweep_id: same model, method, objective
-- metric and goal; its training settings (the spec's `train`, as JSON text: `train_json`, and this
-- sweep's `my_train_json`) and whether it tried the same set of points are decided by the caller
-- (gpuledger/report/adaptive_data.py: train sections read through today's spec model, so a field added
-- since does not split them) from `params`. Newest grid first; each trial with its measured outcome (v_trial_results).
WITH me AS (
    SELECT s.model, s.method, s.objective_metric, s.objective_goal,
           CAST(json_extract(sp.spec_json, '$.train') AS VARCHAR) AS train_json
    FROM sweeps s JOIN specs sp ON sp.spec_id = s.spec_id
    WHERE s.sweep_id = $sweep_id
),
grids AS (
    SELECT s.sweep_id, s.name AS sweep_name, s.started_at,
           CAST(json_extract(sp.spec_json, '$.train') AS VARCHAR) AS train_json, me.train_json AS my_train_json
    FROM sweeps s
    JOIN specs sp ON sp.spec_id = s.spec_id
    JOIN me ON s.model IS NOT DISTINCT FROM me.model
           AND s.method IS NOT DISTINCT FROM me.method
           AND s.objective_metric = me.objective_metric
           AND coalesce(s.objective_goal, 'minimize') = coalesce(me.objective_goal, 'minimize')
    WHERE s.sweep_id <> $sweep_id
      AND json_extract_string(sp.spec_json, '$.search.strategy') = 'grid'
)
SELECT g.sweep_id, g.sweep_name, g.started_at, g.train_json, g.my_train_json, t.trial_id, CAST(t.params AS VARCHAR) AS params, t.status,
       t.metric_value, t.wall_s, t.cost_usd, t.attempts
FROM grids g
JOIN v_trial_results t ON t.sweep_id = g.sweep_id
ORDER BY g.started_at DESC NULLS LAST, g.sweep_id, t.trial_id
