-- What the latest sweep called $name cost (a capacity plan's fine-tune to pay back).
SELECT sweep_id, sweep_name, started_at, ended_at, total_cost_usd, gpu_hours, runs, succeeded
FROM v_sweep_roi WHERE sweep_name = $name
ORDER BY started_at DESC NULLS LAST, sweep_id DESC LIMIT 1
