-- Budget burn (over all weeks) of the sweeps with a budget that had a run start in ISO week $week.
SELECT sweep_id, sweep_name, project, status, budget_usd, total_cost_usd, budget_used_pct
FROM v_sweep_roi
WHERE budget_usd IS NOT NULL
  AND sweep_id IN (SELECT sweep_id FROM v_runs WHERE strftime(started_at, '%G-W%V') = $week)
ORDER BY budget_used_pct DESC NULLS LAST, sweep_id
