-- A sweep's GPU runs whose agent never saw a GPU busy (peak utilisation below $max_util_pct) for at least
-- $min_wall_s seconds: GPUs paid for and idle (the `idle` alert, gpuledger/runtime/alerts.py).
SELECT run_id, trial_id, attempt, accelerator, gpus, wall_s, peak_gpu_util_pct, cost_usd
FROM runs
WHERE sweep_id = $sweep_id AND gpus > 0 AND peak_gpu_util_pct IS NOT NULL
  AND peak_gpu_util_pct < $max_util_pct AND wall_s >= $min_wall_s
ORDER BY started_at, run_id
