-- Runs whose committed cost differs from what the bill says (v_run_billed.effective_usd), per envelope
-- window: what a reconcile row must add so that the ledger's spend is the billed spend.
WITH committed AS (
    SELECT budget, window_start, max(window_end) AS window_end, sweep_id, run_id, sum(spent_usd) AS spent_usd,
           arg_max(owner, recorded_at) AS owner, arg_max(owner_claimed, recorded_at) AS owner_claimed,
           arg_max(project, recorded_at) AS project, arg_max(launched_by, recorded_at) AS launched_by
    FROM budget_ledger
    WHERE kind IN ('commit', 'reconcile') AND run_id IS NOT NULL
    GROUP BY budget, window_start, sweep_id, run_id
)
SELECT c.*, b.effective_usd, b.effective_usd - c.spent_usd AS delta_usd
FROM committed c
JOIN v_run_billed b USING (run_id)
WHERE b.line_items > 0 AND b.effective_usd IS NOT NULL AND abs(b.effective_usd - c.spent_usd) > 0.005
