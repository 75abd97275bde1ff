-- 001: the tables of shared/DESIGN.md. Every timestamp is TIMESTAMP in UTC (naive); every
-- unit is in the column name (_s seconds, _gib GiB = 2^30 bytes, _usd US dollars).
-- No foreign-key constraints: DuckDB refuses to update a parent row that children reference,
-- which would break upserts; the keys are documented instead and ingest keeps them consistent.

-- The experiment specs a sweep was run from (one row per distinct spec content).
CREATE TABLE IF NOT EXISTS specs (
    spec_id       VARCHAR PRIMARY KEY,      -- sha256 hex of the spec's canonical JSON (or YAML text)
    name          VARCHAR NOT NULL,
    kind          VARCHAR NOT NULL DEFAULT 'sweep',
    path          VARCHAR,                  -- where it was read from (informational)
    yaml_text     VARCHAR,
    spec_json     JSON,
    first_seen_at TIMESTAMP NOT NULL
);

-- One row per sweep (a re-run of the same spec continues the same sweep_id).
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id          VARCHAR PRIMARY KEY,  -- f"{name}-{spec_hash[:8]}"
    name              VARCHAR NOT NULL,
    project           VARCHAR,
    owner             VARCHAR,
    spec_id           VARCHAR,              -- specs.spec_id
    spec_path         VARCHAR,
    kind              VARCHAR NOT NULL DEFAULT 'sweep',
    method            VARCHAR,
    model             VARCHAR,
    launcher          VARCHAR,
    objective_metric  VARCHAR,
    objective_goal    VARCHAR CHECK (objective_goal IN ('minimize', 'maximize')),
    objective_target  DOUBLE,
    budget_usd        DOUBLE,
    deadline_s        DOUBLE,
    max_parallel      INTEGER,
    forced            BOOLEAN NOT NULL DEFAULT false,  -- launched although the budget guard refused
    started_at        TIMESTAMP,
    ended_at          TIMESTAMP,
    status            VARCHAR,              -- running | succeeded | failed | cancelled | ...
    plan_json         JSON,
    updated_at        TIMESTAMP NOT NULL
);

-- The planned trials of a sweep (params, placement, estimates) and their current status.
CREATE TABLE IF NOT EXISTS trials (
    sweep_id       VARCHAR NOT NULL,
    trial_id       VARCHAR NOT NULL,
    trial_index    INTEGER,
    params         JSON,
    accelerator    VARCHAR,
    gpus           INTEGER,
    cloud          VARCHAR,
    region         VARCHAR,
    instance_type  VARCHAR,
    spot           BOOLEAN,
    est_memory_gib DOUBLE,
    est_wall_s     DOUBLE,
    est_cost_usd   DOUBLE,
    feasible       BOOLEAN,
    reason         VARCHAR,
    status         VARCHAR NOT NULL DEFAULT 'pending',
    updated_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (sweep_id, trial_id)
);

-- One row per attempt (a result record).
CREATE TABLE IF NOT EXISTS runs (
    run_id            VARCHAR PRIMARY KEY,
    sweep_id          VARCHAR,
    trial_id          VARCHAR NOT NULL,
    attempt           INTEGER NOT NULL,
    launcher          VARCHAR NOT NULL,
    cloud             VARCHAR,
    region            VARCHAR,
    instance_type     VARCHAR,
    accelerator       VARCHAR,
    gpus              INTEGER NOT NULL,
    spot              BOOLEAN NOT NULL,
    started_at        TIMESTAMP NOT NULL,
    ended_at          TIMESTAMP NOT NULL,
    wall_s            DOUBLE NOT NULL,
    exit_code         INTEGER,
    status            VARCHAR NOT NULL,
    reason            VARCHAR,
    peak_gpu_mem_gib  DOUBLE,
    peak_gpu_util_pct DOUBLE,
    peak_rss_gib      DOUBLE,
    preemptions       INTEGER NOT NULL,
    recoveries        INTEGER NOT NULL,
    hostname          VARCHAR,
    command           VARCHAR,
    params            JSON,
    stderr_tail       VARCHAR,
    cost_usd          DOUBLE NOT NULL,      -- sum of the run's billing lines
    ingested_at       TIMESTAMP NOT NULL
);

-- The last value of each metric of a run (the record's final_metrics).
CREATE TABLE IF NOT EXISTS final_metrics (
    run_id VARCHAR NOT NULL,
    name   VARCHAR NOT NULL,
    value  DOUBLE,
    PRIMARY KEY (run_id, name)
);

-- Metric time series: seq = position of the point among the run's points of that name.
CREATE TABLE IF NOT EXISTS metrics (
    run_id VARCHAR NOT NULL,
    name   VARCHAR NOT NULL,
    seq    INTEGER NOT NULL,
    step   BIGINT,
    t_s    DOUBLE,
    value  DOUBLE,
    PRIMARY KEY (run_id, name, seq)
);

-- Billing line items of a run.
CREATE TABLE IF NOT EXISTS billing (
    run_id                 VARCHAR NOT NULL,
    line_no                INTEGER NOT NULL,
    source                 VARCHAR NOT NULL CHECK (source IN ('local', 'catalog', 'invoice')),
    description            VARCHAR,
    usd_per_hour           DOUBLE NOT NULL,
    hours                  DOUBLE NOT NULL,
    cost_usd               DOUBLE NOT NULL,
    spot                   BOOLEAN NOT NULL,
    on_demand_usd_per_hour DOUBLE,
    PRIMARY KEY (run_id, line_no)
);

-- The price snapshot a sweep's plan used (replaced as a whole when the sweep is registered again).
CREATE TABLE IF NOT EXISTS prices (
    sweep_id               VARCHAR NOT NULL,
    seq                    INTEGER NOT NULL,
    cloud                  VARCHAR,
    region                 VARCHAR,
    instance_type          VARCHAR,
    accelerator            VARCHAR,
    accelerator_count      INTEGER,
    spot                   BOOLEAN,
    usd_per_hour           DOUBLE,
    on_demand_usd_per_hour DOUBLE,
    source                 VARCHAR,
    as_of                  VARCHAR,
    extra                  JSON,            -- any other fields of the planner's offer row
    PRIMARY KEY (sweep_id, seq)
);
