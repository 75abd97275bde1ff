-- One sweep's trials by outcome for the search comparison (benchmarks/search_compare.py): trials run
-- (pruned included; not the candidates the search never asked for), pruned ones, trial-seconds (sum of every attempt's wall-clock, pruned runs included), cost, best value.
SELECT count(*) AS trials,
       count(*) FILTER (WHERE status = 'pruned') AS pruned,
       coalesce(sum(wall_s), 0.0) AS trial_s,
       coalesce(sum(cost_usd), 0.0) AS cost_usd,
       min(metric_value) AS best_min,
       max(metric_value) AS best_max
FROM v_trial_results WHERE sweep_id = $sweep_id AND status NOT IN ('pending', 'not-asked', 'skipped-budget')
