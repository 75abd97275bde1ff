-- A year of a 50-person team, synthetic and deterministic: $sweeps sweeps (owner = sweep % 50,
-- week = sweep * 52 // $sweeps: stored in time order, as runs are ingested when they end),
-- $runs_per_sweep trials each with one run, $metrics_per_run metric points per run, and one billing
-- line per run (as every ingested run has: hours x $/h, with the on-demand price of its spot runs).
-- Run against a migrated warehouse; benchmarks/warehouse_scale.py times what reads it.
INSERT INTO sweeps (sweep_id, name, project, owner, kind, method, model, launcher, objective_metric,
                    objective_goal, budget_usd, max_parallel, forced, started_at, status, updated_at)
SELECT 'sweep-' || s, 'sweep-' || (s % 500), 'project-' || (s % 12), 'person-' || (s % 50), 'sweep', 'lora',
       'llama-3.1-8b', 'skypilot', 'eval_loss', 'minimize', 500.0, 8, false,
       TIMESTAMP '2025-01-06' + to_days((s * 52 // $sweeps) * 7) + to_hours(s % 24), 'succeeded', TIMESTAMP '2026-01-01'
FROM range($sweeps) t(s);

INSERT INTO trials (sweep_id, trial_id, trial_index, params, accelerator, gpus, cloud, spot, est_wall_s,
                    est_cost_usd, feasible, status, updated_at)
SELECT 'sweep-' || (i // $runs_per_sweep), printf('%012x', i), i % $runs_per_sweep, '{"lr": 0.001}',
       'A100', 1, 'aws', i % 3 = 0, 3600, 4.1, true, 'succeeded', TIMESTAMP '2026-01-01'
FROM range($sweeps * $runs_per_sweep) t(i);

INSERT INTO runs (run_id, sweep_id, trial_id, attempt, launcher, cloud, region, accelerator, gpus, spot,
                  started_at, ended_at, wall_s, exit_code, status, preemptions, recoveries, cost_usd, ingested_at)
SELECT 'run-' || i, 'sweep-' || (i // $runs_per_sweep), printf('%012x', i), 1, 'skypilot', 'aws', 'us-east-1',
       CASE i % 4 WHEN 0 THEN 'A100' WHEN 1 THEN 'H100' WHEN 2 THEN 'L4' ELSE 'A10G' END, 1, i % 3 = 0,
       TIMESTAMP '2025-01-06' + to_days(((i // $runs_per_sweep) * 52 // $sweeps) * 7) + to_seconds(i % 86400),
       TIMESTAMP '2025-01-06' + to_days(((i // $runs_per_sweep) * 52 // $sweeps) * 7) + to_seconds(i % 86400 + 1800 + i % 3600),
       1800 + i % 3600, 0, CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeeded' END, 0, 0,
       (1800 + i % 3600) / 3600.0 * 2.5, TIMESTAMP '2026-01-01'
FROM range($sweeps * $runs_per_sweep) t(i);

INSERT INTO billing (run_id, line_no, source, description, usd_per_hour, hours, cost_usd, spot,
                     on_demand_usd_per_hour)
SELECT 'run-' || i, 1, 'catalog', 'aws us-east-1 1x gpu', 2.5, (1800 + i % 3600) / 3600.0,
       (1800 + i % 3600) / 3600.0 * 2.5, i % 3 = 0, CASE WHEN i % 3 = 0 THEN 7.5 END
FROM range($sweeps * $runs_per_sweep) t(i);

INSERT INTO final_metrics (run_id, name, value)
SELECT 'run-' || i, 'eval_loss', 1.0 + (hash(i) % 1000) / 1000.0 FROM range($sweeps * $runs_per_sweep) t(i);

INSERT INTO metrics (run_id, name, seq, step, t_s, value)
SELECT 'run-' || (k // $metrics_per_run), 'eval_loss', k % $metrics_per_run, (k % $metrics_per_run) * 10,
       (k % $metrics_per_run) * 30.0, 2.0 - (k % $metrics_per_run) / 100.0
FROM range($sweeps * $runs_per_sweep * $metrics_per_run) t(k);
