-- One torn-down pool of a sweep run (gpuledger/warehouse/pools.py).
INSERT INTO sweep_pools (sweep_id, pool, recorded_at, workers, reused, trials, worker_s, busy_s, idle_s, startup_s,
                         usd_per_hour, pool_usd, idle_usd, per_trial_jobs_usd, saving_usd)
VALUES ($sweep_id, $pool, $recorded_at, $workers, $reused, $trials, $worker_s, $busy_s, $idle_s, $startup_s,
        $usd_per_hour, $pool_usd, $idle_usd, $per_trial_jobs_usd, $saving_usd)
