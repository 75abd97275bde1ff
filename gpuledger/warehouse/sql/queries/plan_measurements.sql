-- Measured trials of a model and method, for the planner's calibration (gpuledger/plan/throughput_calibration.py):
-- per trial id and placement, the median wall-clock (s) of its succeeded runs, how many, the host,
-- and the FLOPs its plan estimated. Local runs have no accelerator: they count as 'CPU', 1 "GPU".
SELECT r.trial_id,
       CASE WHEN r.launcher = 'local' THEN 'CPU' ELSE r.accelerator END AS accelerator,
       CASE WHEN r.launcher = 'local' THEN 1 ELSE r.gpus END AS gpus,
       CASE WHEN r.launcher = 'local' THEN r.hostname END AS hostname,
       median(r.wall_s) AS wall_s,
       count(*) AS runs,
       max(t.est_flops) AS est_flops
FROM runs r
JOIN sweeps s ON s.sweep_id = r.sweep_id
LEFT JOIN trials t ON t.sweep_id = r.sweep_id AND t.trial_id = r.trial_id
WHERE r.status = 'succeeded' AND r.wall_s > 0 AND coalesce(r.purpose, 'trial') = 'trial' AND s.model = $model AND s.method = $method
GROUP BY ALL
ORDER BY r.trial_id, accelerator, gpus, hostname
