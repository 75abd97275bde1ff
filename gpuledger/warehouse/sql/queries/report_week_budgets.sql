-- Budget burn (over all weeks) of the sweeps with a budget that had a run start in the ISO week
-- [$week_start, $week_end): the columns of v_sweep_roi, computed for those sweeps only (v_sweep_roi
-- ranks, spends and counts every sweep's runs before any filter). total_cost_usd and budget_used_pct
-- as v_sweep_roi defines them (tests/unit/test_report_weekly.py checks both agree); accrued_usd adds what the
-- sweep's running trials have cost so far.
WITH week_sweeps AS (
    SELECT DISTINCT sweep_id FROM runs
    WHERE started_at >= $week_start AND started_at < $week_end AND sweep_id IS NOT NULL
    UNION  -- a sweep whose first trial is still running in the week (accrued, not yet a run)
    SELECT DISTINCT sweep_id FROM trial_accruals
    WHERE running AND started_at >= $week_start AND started_at < $week_end
),
spent AS (
    SELECT r.sweep_id, sum(r.cost_usd) AS cost_usd
    FROM runs r SEMI JOIN week_sweeps w ON w.sweep_id = r.sweep_id
    GROUP BY r.sweep_id
),
accrued AS (  -- what running trials have cost so far (price x elapsed, gpuledger/runtime/accrual.py)
    SELECT sweep_id, sum(accrued_usd) AS running_accrued_usd
    FROM trial_accruals
    WHERE running
    GROUP BY sweep_id
)
SELECT s.sweep_id, s.name AS sweep_name, s.project, s.status, s.budget_usd,
       coalesce(sp.cost_usd, 0.0) AS total_cost_usd,
       CASE WHEN s.budget_usd > 0 THEN 100.0 * coalesce(sp.cost_usd, 0.0) / s.budget_usd END AS budget_used_pct,
       coalesce(a.running_accrued_usd, 0.0) AS running_accrued_usd,
       coalesce(sp.cost_usd, 0.0) + coalesce(a.running_accrued_usd, 0.0) AS accrued_usd
FROM sweeps s
JOIN week_sweeps w ON w.sweep_id = s.sweep_id
LEFT JOIN spent sp ON sp.sweep_id = s.sweep_id
LEFT JOIN accrued a ON a.sweep_id = s.sweep_id
WHERE s.budget_usd IS NOT NULL
ORDER BY budget_used_pct DESC NULLS LAST, s.sweep_id
