-- Learning curves of the objective (gpuledger/search/asha_replay.py `curves_from_points`): one row per
-- point of the sweep's objective metric per run (a run that logged none: one row, seq NULL), with
-- the run's params, status, measured wall-clock and cost, and the sweep's goal, slots and pruning
-- settings, in run start order.
-- Either one sweep ($sweep_id; $model, $method, $metric NULL), or ($sweep_id NULL) the runs of every
-- sweep of the same $model, $method and objective $metric (the planner's measured curves,
-- gpuledger/plan/pruning.py); `train` is the spec's train section, to compare like with like.
SELECT r.run_id,
       r.sweep_id,
       r.trial_id,
       r.params,
       m.seq,
       m.step,
       m.t_s,
       m.value,
       r.wall_s,
       r.cost_usd,
       r.status,
       r.started_at,
       r.launcher,
       r.accelerator,
       r.gpus,
       r.hostname,
       s.objective_metric AS metric,
       s.objective_goal AS goal,
       s.max_parallel,
       json_extract(sp.spec_json, '$.train') AS train,
       json_extract(sp.spec_json, '$.search.pruning') AS pruning
FROM runs r
JOIN sweeps s ON s.sweep_id = r.sweep_id
LEFT JOIN specs sp ON sp.spec_id = s.spec_id
LEFT JOIN metrics m ON m.run_id = r.run_id AND m.name = s.objective_metric
WHERE coalesce(r.purpose, 'trial') = 'trial'
  AND CASE WHEN $sweep_id::VARCHAR IS NOT NULL THEN r.sweep_id = $sweep_id::VARCHAR
           ELSE s.model = $model::VARCHAR AND s.method = $method::VARCHAR
                AND s.objective_metric = $metric::VARCHAR END
ORDER BY r.started_at, r.run_id, m.seq
