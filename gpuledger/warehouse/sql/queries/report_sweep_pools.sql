-- The SkyPilot pools of a sweep, oldest first (gpuledger/report/pools.py).
SELECT pool, recorded_at, workers, reused, trials, worker_s, busy_s, idle_s, startup_s, usd_per_hour, pool_usd,
       idle_usd, per_trial_jobs_usd, saving_usd
FROM sweep_pools
WHERE sweep_id = $sweep_id
ORDER BY recorded_at, pool
