-- A launch waits for approval (gpuledger/warehouse/budget_ledger.py).
INSERT INTO budget_approvals (approval_id, sweep_id, sweep_name, budget, approvers, reserved_usd, reason, flow_run_id,
                              api_url, owner, requested_at, state)
VALUES ($approval_id, $sweep_id, $sweep_name, $budget, $approvers, $reserved_usd, $reason, $flow_run_id,
        $api_url, $owner, $requested_at, 'awaiting')
