-- One row per sweep: best recipe, time and cost to find it and to reach the target, spend, waste.
-- Sweep start = the earlier of sweeps.started_at and the first run's start.
-- The best run: succeeded, objective metric present, lowest (minimize; also when the goal is
-- unknown) or highest (maximize) value; ties go to the run that ended first.
-- cost_to_recipe_usd counts every run that ENDED by the moment the best run ended (runs still
-- running then are not counted, although they were paid for later). Probe runs (purpose 'probe')
-- are spend (total, waste, to recipe: they ran before the trials) but never the best run, and the
-- sweep's start is its first trial's.
WITH ids AS (
    SELECT sweep_id FROM sweeps
    UNION SELECT sweep_id FROM runs WHERE sweep_id IS NOT NULL
),
base AS (
    SELECT i.sweep_id, s.name, s.project, s.owner, s.objective_metric, s.objective_target,
           s.budget_usd, s.ended_at, s.status,
           coalesce(s.objective_goal, 'minimize') AS goal,
           least(s.started_at, (SELECT min(r.started_at) FROM runs r WHERE r.sweep_id = i.sweep_id
                                                AND coalesce(r.purpose, 'trial') = 'trial')) AS started_at
    FROM ids i LEFT JOIN sweeps s ON s.sweep_id = i.sweep_id
),
ranked AS (
    SELECT r.sweep_id, r.trial_id, r.run_id, r.metric_value, r.ended_at,
           row_number() OVER (
               PARTITION BY r.sweep_id
               ORDER BY CASE WHEN b.goal = 'maximize' THEN -r.metric_value ELSE r.metric_value END,
                        r.ended_at, r.run_id) AS rk
    FROM v_runs r JOIN base b ON b.sweep_id = r.sweep_id
    WHERE r.status = 'succeeded' AND r.metric_value IS NOT NULL AND r.purpose = 'trial'
),
best AS (SELECT * FROM ranked WHERE rk = 1),
target AS (
    SELECT r.sweep_id, min(r.ended_at) AS reached_at
    FROM v_runs r JOIN base b ON b.sweep_id = r.sweep_id
    WHERE r.status = 'succeeded' AND r.metric_value IS NOT NULL AND b.objective_target IS NOT NULL
      AND r.purpose = 'trial'
      AND CASE WHEN b.goal = 'maximize' THEN r.metric_value >= b.objective_target
               ELSE r.metric_value <= b.objective_target END
    GROUP BY r.sweep_id
),
spend AS (
    SELECT r.sweep_id,
           sum(r.cost_usd) AS total_cost_usd,
           sum(r.gpu_hours) AS gpu_hours,
           count(*) AS runs,
           sum(r.cost_usd) FILTER (WHERE r.wasted) AS waste_usd,
           sum(r.cost_usd) FILTER (WHERE r.ended_at <= bs.ended_at) AS cost_to_recipe_usd,
           sum(r.cost_usd) FILTER (WHERE r.ended_at <= tg.reached_at) AS cost_to_target_usd,
           max(r.ended_at) AS last_run_end
    FROM v_run_facts r
    LEFT JOIN best bs ON bs.sweep_id = r.sweep_id
    LEFT JOIN target tg ON tg.sweep_id = r.sweep_id
    WHERE r.sweep_id IS NOT NULL
    GROUP BY r.sweep_id
),
tr AS (
    SELECT sweep_id,
           count(*) AS trials,
           count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status IN ('failed', 'oom', 'preempted', 'cancelled')) AS failed,
           count(*) FILTER (WHERE status = 'skipped-budget') AS skipped
    FROM v_trial_results GROUP BY sweep_id
)
SELECT b.sweep_id,
       b.name AS sweep_name,
       b.project,
       b.owner,
       b.started_at,
       b.ended_at,
       b.status,
       b.objective_metric AS metric_name,
       b.goal,
       b.objective_target AS target,
       bs.trial_id AS best_trial_id,
       bs.run_id AS best_run_id,
       bs.metric_value AS best_metric,
       date_diff('microsecond', b.started_at, bs.ended_at) / 1e6 AS time_to_recipe_s,
       CASE WHEN bs.run_id IS NULL THEN NULL ELSE coalesce(sp.cost_to_recipe_usd, 0.0) END AS cost_to_recipe_usd,
       date_diff('microsecond', b.started_at, tg.reached_at) / 1e6 AS time_to_target_s,
       CASE WHEN tg.reached_at IS NULL THEN NULL ELSE coalesce(sp.cost_to_target_usd, 0.0) END AS cost_to_target_usd,
       date_diff('microsecond', b.started_at, sp.last_run_end) / 1e6 AS makespan_s,
       coalesce(sp.total_cost_usd, 0.0) AS total_cost_usd,
       coalesce(sp.gpu_hours, 0.0) AS gpu_hours,
       b.budget_usd,
       CASE WHEN b.budget_usd > 0 THEN 100.0 * coalesce(sp.total_cost_usd, 0.0) / b.budget_usd END AS budget_used_pct,
       coalesce(tr.trials, 0) AS trials,
       coalesce(tr.succeeded, 0) AS succeeded,
       coalesce(tr.failed, 0) AS failed,
       coalesce(tr.skipped, 0) AS skipped,
       coalesce(sp.runs, 0) AS runs,
       coalesce(sp.waste_usd, 0.0) AS waste_usd,
       CASE WHEN tr.succeeded > 0 THEN coalesce(sp.total_cost_usd, 0.0) / tr.succeeded END AS cost_per_succeeded_trial_usd
FROM base b
LEFT JOIN best bs ON bs.sweep_id = b.sweep_id
LEFT JOIN target tg ON tg.sweep_id = b.sweep_id
LEFT JOIN spend sp ON sp.sweep_id = b.sweep_id
LEFT JOIN tr ON tr.sweep_id = b.sweep_id
