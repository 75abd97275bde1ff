-- Per envelope and window: the money spent, held and left (budget_ledger; docs/budgets.md). A sweep
-- holds the larger of its reservation and what its running trials accrued beyond their committed
-- runs, so a trial that runs past its plan counts while it runs.
WITH per_sweep AS (
    SELECT budget, window_start, max(window_end) AS window_end, sweep_id,
           sum(spent_usd) AS spent_usd, greatest(sum(reserved_usd), 0) AS reserved_usd
    FROM budget_ledger
    GROUP BY budget, window_start, sweep_id
),
accrued AS (
    SELECT sweep_id, sum(accrued_usd) AS accrued_usd
    FROM trial_accruals
    WHERE running
    GROUP BY sweep_id
),
held AS (
    SELECT p.*, coalesce(a.accrued_usd, 0) AS accrued_usd,
           p.spent_usd + greatest(p.reserved_usd, coalesce(a.accrued_usd, 0)) AS used_usd
    FROM per_sweep p
    LEFT JOIN accrued a USING (sweep_id)
)
SELECT e.budget, e.scope, e."window", h.window_start, max(h.window_end) AS window_end, e.limit_usd, e.soft_usd,
       sum(h.spent_usd) AS spent_usd,
       sum(h.reserved_usd) AS reserved_usd,
       sum(h.accrued_usd) AS accrued_usd,
       sum(h.used_usd) AS used_usd,
       e.limit_usd - sum(h.used_usd) AS remaining_usd,
       count(DISTINCT h.sweep_id) AS sweeps
FROM held h
JOIN budget_envelopes e USING (budget)
GROUP BY e.budget, e.scope, e."window", h.window_start, e.limit_usd, e.soft_usd
