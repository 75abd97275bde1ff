-- Budget burn (over all weeks) of the sweeps with a budget that had a run start, or a trial start that is
-- still running, in ISO week $week, with what their running trials have accrued: the product's
-- report_week_budgets read the way before the push-down, v_sweep_roi and v_runs filtered by
-- strftime(started_at, '%G-W%V') = $week.
SELECT r.sweep_id, r.sweep_name, r.project, r.status, r.budget_usd, r.total_cost_usd, r.budget_used_pct,
       coalesce(a.running_accrued_usd, 0.0) AS running_accrued_usd,
       r.total_cost_usd + coalesce(a.running_accrued_usd, 0.0) AS accrued_usd
FROM v_sweep_roi r
LEFT JOIN (SELECT sweep_id, sum(accrued_usd) AS running_accrued_usd
           FROM trial_accruals WHERE running GROUP BY sweep_id) a USING (sweep_id)
WHERE r.budget_usd IS NOT NULL
  AND (r.sweep_id IN (SELECT sweep_id FROM v_runs WHERE strftime(started_at, '%G-W%V') = $week)
       OR r.sweep_id IN (SELECT sweep_id FROM trial_accruals WHERE running AND strftime(started_at, '%G-W%V') = $week))
ORDER BY r.budget_used_pct DESC NULLS LAST, r.sweep_id
