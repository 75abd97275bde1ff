-- 013: what a sweep's SkyPilot pool cost beyond its trials' own records (gpuledger/launch/skypilot_pool.py).
-- A trial on a pool is billed in its run record for its time on its worker; the workers' start-up and the
-- idle tail until the pool is torn down are the sweep's, stored here, one row per pool and run of the sweep.
CREATE TABLE IF NOT EXISTS sweep_pools (
    sweep_id            VARCHAR NOT NULL,   -- sweeps.sweep_id
    pool                VARCHAR NOT NULL,   -- the SkyPilot pool name (gl-<sweep_id>)
    recorded_at         TIMESTAMP NOT NULL, -- UTC, when the pool was torn down
    workers             INTEGER NOT NULL,
    reused              BOOLEAN NOT NULL,   -- a leftover of an earlier run, counted from this run's apply
    trials              INTEGER NOT NULL,   -- trials launched onto it by this run
    worker_s            DOUBLE NOT NULL,    -- every worker from its launch to the teardown, summed
    busy_s              DOUBLE NOT NULL,    -- the trials' attempts on it (billed in their run records)
    idle_s              DOUBLE NOT NULL,    -- worker_s - busy_s: start-up and idle tail, the sweep's
    startup_s           DOUBLE,             -- the workers' mean measured start-up (launch to first trial)
    usd_per_hour        DOUBLE NOT NULL,    -- the plan's worker price
    pool_usd            DOUBLE NOT NULL,    -- worker_s x usd_per_hour
    idle_usd            DOUBLE NOT NULL,    -- idle_s x usd_per_hour
    per_trial_jobs_usd  DOUBLE,             -- the same trials as per-trial jobs: busy + one start-up each
    saving_usd          DOUBLE,             -- per_trial_jobs_usd - pool_usd
    PRIMARY KEY (sweep_id, pool, recorded_at)
);
