-- The best recipe of a sweep (v_sweep_roi) with its trial's params: the sweep's closing summary.
SELECT r.best_trial_id AS trial_id, t.params, r.metric_name, r.goal, r.best_metric,
       r.time_to_recipe_s, r.cost_to_recipe_usd, r.total_cost_usd
FROM v_sweep_roi r
LEFT JOIN trials t ON t.sweep_id = r.sweep_id AND t.trial_id = r.best_trial_id
WHERE r.sweep_id = $sweep_id AND r.best_trial_id IS NOT NULL
