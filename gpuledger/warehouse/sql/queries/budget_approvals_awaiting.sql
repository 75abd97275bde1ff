-- Launches waiting for approval, newest first; $sweep (a sweep id or name) or NULL for all.
SELECT approval_id, sweep_id, sweep_name, budget, approvers, reserved_usd, reason, flow_run_id, api_url, owner,
       requested_at, state
FROM budget_approvals
WHERE state = 'awaiting' AND ($sweep IS NULL OR sweep_id = $sweep OR sweep_name = $sweep)
ORDER BY requested_at DESC
