-- A sweep's trials planned from a probe against what they measured (benchmarks/probe_accuracy.py,
-- docs/probes.md): per succeeded trial attempt, the planned and measured wall-clock (v_estimate_accuracy,
-- error = (planned - measured) / measured) and their parts: the start-up (the first training step's
-- time since the attempt started) and the steady tokens/s (first to last training step), measured and
-- as the probe named in the trial's est_basis ('probe RUN_ID DATE') measured them; probe_warm_startup_s
-- is the least start-up of the probes of that shape on that host (what the plan takes, plan_probes).
WITH steps AS (
    SELECT m.run_id, m.step, min(m.t_s) AS t_s, max(m.value) FILTER (WHERE m.name = 'tokens') AS tokens
    FROM metrics m
    JOIN runs r ON r.run_id = m.run_id
    WHERE r.sweep_id = $sweep_id AND m.step >= 1 AND m.t_s IS NOT NULL
    GROUP BY m.run_id, m.step
),
span AS (
    SELECT run_id,
           min(t_s) AS startup_s,
           max(t_s) - min(t_s) AS steady_s,
           arg_max(tokens, t_s) FILTER (WHERE tokens IS NOT NULL)
               - arg_min(tokens, t_s) FILTER (WHERE tokens IS NOT NULL) AS steady_tokens
    FROM steps
    GROUP BY run_id
),
probes AS (
    SELECT run_id, startup_s, tokens_per_s, steady_s,
           min(startup_s) OVER (PARTITION BY probe_shape::VARCHAR, hostname) AS warm_startup_s
    FROM v_probes
)
SELECT e.trial_id,
       e.run_id,
       t.est_basis,
       r.started_at,
       e.est_wall_s,
       e.wall_s,
       e.time_err_pct,
       s.startup_s,
       s.steady_s,
       CASE WHEN s.steady_s > 0 THEN s.steady_tokens / s.steady_s END AS tokens_per_s,
       p.run_id AS probe_run_id,
       p.warm_startup_s AS probe_warm_startup_s,
       p.tokens_per_s AS probe_tokens_per_s,
       p.steady_s AS probe_steady_s
FROM v_estimate_accuracy e
JOIN trials t ON t.sweep_id = e.sweep_id AND t.trial_id = e.trial_id
JOIN v_runs r ON r.run_id = e.run_id
LEFT JOIN span s ON s.run_id = e.run_id
LEFT JOIN probes p ON p.run_id = split_part(t.est_basis, ' ', 2)
WHERE e.sweep_id = $sweep_id AND e.status = 'succeeded'
ORDER BY r.started_at, e.run_id
