-- Budget burn (over all weeks) of the sweeps with a budget that had a run start in the ISO week
-- [$week_start, $week_end): the columns of v_sweep_roi, computed for those sweeps only (v_sweep_roi
-- ranks, spends and counts every sweep's runs before any filter). total_cost_usd and budget_used_pct
-- as v_sweep_roi defines them (tests/unit/test_report_weekly.py checks both agree).
WITH week_sweeps AS (
    SELECT DISTINCT sweep_id FROM runs
    WHERE started_at >= $week_start AND started_at < $week_end AND sweep_id IS NOT NULL
),
spent AS (
    SELECT r.sweep_id, sum(r.cost_usd) AS cost_usd
    FROM runs r SEMI JOIN week_sweeps w ON w.sweep_id = r.sweep_id
    GROUP BY r.sweep_id
)
SELECT s.sweep_id, s.name AS sweep_name, s.project, s.status, s.budget_usd,
       coalesce(sp.cost_usd, 0.0) AS total_cost_usd,
       CASE WHEN s.budget_usd > 0 THEN 100.0 * coalesce(sp.cost_usd, 0.0) / s.budget_usd END AS budget_used_pct
FROM sweeps s
JOIN spent sp ON sp.sweep_id = s.sweep_id
WHERE s.budget_usd IS NOT NULL
ORDER BY budget_used_pct DESC NULLS LAST, s.sweep_id
