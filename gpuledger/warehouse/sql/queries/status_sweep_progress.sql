-- gpuledger status: per sweep of $ids, its plan's total (USD), its parallelism cap, how the finished trials'
-- measured wall-clock compares with their plan (the ETA scales the rest by it), and its running trials'
-- planned and elapsed seconds.
WITH finished AS (
    SELECT r.sweep_id, sum(r.wall_s) AS wall_s, sum(t.est_wall_s) AS est_wall_s, count(*) AS n
    FROM runs r JOIN trials t ON t.sweep_id = r.sweep_id AND t.trial_id = r.trial_id
    WHERE list_contains($ids, r.sweep_id) AND r.status = 'succeeded' AND coalesce(r.purpose, 'trial') = 'trial'
      AND t.est_wall_s > 0
    GROUP BY r.sweep_id
), running AS (
    SELECT a.sweep_id,
           count(*) AS n,
           sum(coalesce(t.est_wall_s, 0)) AS est_wall_s,
           sum(a.elapsed_s) AS elapsed_s
    FROM trial_accruals a LEFT JOIN trials t ON t.sweep_id = a.sweep_id AND t.trial_id = a.trial_id
    WHERE list_contains($ids, a.sweep_id) AND a.running
    GROUP BY a.sweep_id
)
SELECT s.sweep_id,
       s.max_parallel,
       TRY_CAST(s.plan_json->>'total_est_cost_usd' AS DOUBLE) AS planned_usd,
       f.wall_s AS finished_wall_s, f.est_wall_s AS finished_est_wall_s, coalesce(f.n, 0) AS finished_trials,
       coalesce(r.n, 0) AS running_trials, r.est_wall_s AS running_est_wall_s, r.elapsed_s AS running_elapsed_s
FROM sweeps s
LEFT JOIN finished f ON f.sweep_id = s.sweep_id
LEFT JOIN running r ON r.sweep_id = s.sweep_id
WHERE list_contains($ids, s.sweep_id)
