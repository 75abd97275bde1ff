-- Every launch through `gpuledger mcp` with what it counts against the agent budget: while its sweep
-- runs (or has not registered yet) the larger of the planned and the measured spend; once the sweep
-- ended, the measured spend. Measured = the billed cost of the sweep's runs that started at or after
-- the launch (a re-launch of the same sweep counts only its own runs; runs of the next launch of the
-- same sweep are counted by that launch: runs belong to the latest launch at or before their start).
WITH launches AS (
    SELECT l.*,
           lead(l.launched_at) OVER (PARTITION BY l.sweep_id ORDER BY l.launched_at, l.launch_id) AS next_launch_at
    FROM agent_launches l
),
measured AS (
    SELECT l.launch_id, coalesce(sum(b.cost_usd), 0) AS measured_usd
    FROM launches l
    LEFT JOIN runs r ON r.sweep_id = l.sweep_id AND r.started_at >= l.launched_at
                    AND (l.next_launch_at IS NULL OR r.started_at < l.next_launch_at)
    LEFT JOIN billing b ON b.run_id = r.run_id
    GROUP BY l.launch_id
)
SELECT l.launch_id, l.sweep_id, l.spec_path, l.plan_id, l.planned_usd, l.budget_usd, l.launched_at, l.pid,
       l.host, s.status AS sweep_status, m.measured_usd
FROM launches l
JOIN measured m USING (launch_id)
LEFT JOIN sweeps s ON s.sweep_id = l.sweep_id
ORDER BY l.launched_at, l.launch_id
