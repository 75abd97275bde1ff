-- One launch through `gpuledger mcp` (gpuledger/warehouse/agent_launches.py).
INSERT INTO agent_launches (launch_id, sweep_id, spec_path, spec_sha256, plan_id, planned_usd, budget_usd,
                            launched_at, pid, host)
VALUES ($launch_id, $sweep_id, $spec_path, $spec_sha256, $plan_id, $planned_usd, $budget_usd,
        $launched_at, $pid, $host)
