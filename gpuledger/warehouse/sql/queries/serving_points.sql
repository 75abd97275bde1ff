-- Measured serving operating points of one sweep ($sweep_id): one row per succeeded run that
-- reported the serving metrics of trainers/serve_bench.py, with its placement, the hourly price it
-- was billed at (NULL when it has no billing lines), its sweep's name and when it ended.
SELECT v.sweep_id,
       v.sweep_name,
       v.run_id,
       v.trial_id,
       v.params,
       v.accelerator,
       v.gpus,
       v.cloud,
       v.instance_type,
       v.spot,
       v.ended_at,
       v.wall_s,
       CASE WHEN v.billed_hours > 0 THEN v.cost_usd / v.billed_hours END AS usd_per_hour,
       max(m.value) FILTER (WHERE m.name = 'output_tokens_per_s') AS output_tokens_per_s,
       max(m.value) FILTER (WHERE m.name = 'requests_per_s') AS requests_per_s,
       max(m.value) FILTER (WHERE m.name = 'ttft_ms_p50') AS ttft_ms_p50,
       max(m.value) FILTER (WHERE m.name = 'ttft_ms_p95') AS ttft_ms_p95,
       max(m.value) FILTER (WHERE m.name = 'ttft_ms_p99') AS ttft_ms_p99,
       max(m.value) FILTER (WHERE m.name = 'tpot_ms_p50') AS tpot_ms_p50,
       max(m.value) FILTER (WHERE m.name = 'tpot_ms_p95') AS tpot_ms_p95,
       max(m.value) FILTER (WHERE m.name = 'tpot_ms_p99') AS tpot_ms_p99
FROM v_runs v
JOIN final_metrics m ON m.run_id = v.run_id
WHERE v.sweep_id = $sweep_id AND v.status = 'succeeded'
GROUP BY ALL
HAVING max(m.value) FILTER (WHERE m.name = 'output_tokens_per_s') IS NOT NULL
   AND max(m.value) FILTER (WHERE m.name = 'tpot_ms_p95') IS NOT NULL
   AND max(m.value) FILTER (WHERE m.name = 'ttft_ms_p95') IS NOT NULL
ORDER BY v.accelerator, v.gpus, v.trial_id, v.ended_at
