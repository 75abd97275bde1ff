-- How one sweep ($sweep_id) searched, as its spec says: the strategy (NULL when the spec was not
-- stored), ASHA's pruning settings (NULL: the spec left them to their defaults), its stopping rule, and what a grid of
-- the same experiment must share with it (model, method, objective, training settings as JSON text);
-- params_json: the search space (a range is an object {low, high, ...}, a list of values an array).
SELECT s.sweep_id, s.name AS sweep_name, s.model, s.method, s.objective_metric, s.objective_goal,
       json_extract_string(sp.spec_json, '$.search.strategy') AS strategy,
       TRY_CAST(json_extract(sp.spec_json, '$.search.pruning.min_steps') AS INTEGER) AS min_steps,
       TRY_CAST(json_extract(sp.spec_json, '$.search.pruning.reduction_factor') AS INTEGER) AS reduction_factor,
       json_extract_string(sp.spec_json, '$.search.stopping') AS stopping,
       TRY_CAST(json_extract(sp.spec_json, '$.search.pruning.suspend') AS BOOLEAN) AS suspend,
       CAST(json_extract(sp.spec_json, '$.train') AS VARCHAR) AS train_json,
       CAST(json_extract(sp.spec_json, '$.search.params') AS VARCHAR) AS params_json
FROM sweeps s
LEFT JOIN specs sp ON sp.spec_id = s.spec_id
WHERE s.sweep_id = $sweep_id
