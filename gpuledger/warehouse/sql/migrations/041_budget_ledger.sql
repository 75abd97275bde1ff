-- 041: team money (docs/budgets.md). Spending envelopes over windows (`[[budgets]]`), the ledger of
-- every movement of money against them, approvals of launches past a soft threshold, the spend
-- running trials accrue before their records arrive, and the alerts sent (each once).

-- The envelopes as configured when a launch last counted against them (the config is the truth; this
-- copy lets v_budgets show the limit beside the money).
CREATE TABLE IF NOT EXISTS budget_envelopes (
    budget      VARCHAR PRIMARY KEY,   -- [[budgets]] name ('agent' for [agent] budget_usd)
    scope       VARCHAR NOT NULL,      -- project:X | owner:X | agent | all
    "window"    VARCHAR NOT NULL,      -- day | week | month | all | YYYY-MM-DD..YYYY-MM-DD
    limit_usd   DOUBLE NOT NULL,
    soft_usd    DOUBLE,
    approvers   JSON,
    updated_at  TIMESTAMP NOT NULL
);

-- Every movement of money against an envelope's window: a launch RESERVES its planned spend when
-- accepted, each stored run COMMITS its measured cost (moving that much out of the reservation),
-- the launch RELEASES what it still holds when it ends, a bill RECONCILES a run's committed cost
-- with what was billed. Deltas: reserved_usd (+ reserve, - commit/release) and spent_usd
-- (+ commit, +/- reconcile). Rows are never updated.
CREATE TABLE IF NOT EXISTS budget_ledger (
    entry_id      VARCHAR PRIMARY KEY,   -- kind:budget:window_start:sweep/run (commit, reconcile) or a uuid
    recorded_at   TIMESTAMP NOT NULL,    -- UTC
    budget        VARCHAR NOT NULL,      -- budget_envelopes.budget
    window_start  TIMESTAMP NOT NULL,    -- the envelope's window the reservation was made in
    window_end    TIMESTAMP NOT NULL,
    kind          VARCHAR NOT NULL CHECK (kind IN ('reserve', 'commit', 'release', 'reconcile')),
    sweep_id      VARCHAR NOT NULL,
    run_id        VARCHAR,               -- commit, reconcile: the run
    reserved_usd  DOUBLE NOT NULL,       -- change of the money held
    spent_usd     DOUBLE NOT NULL,       -- change of the money spent
    owner         VARCHAR,               -- who launched, as observed (OS user)
    owner_claimed VARCHAR,               -- the spec's owner, as claimed
    project       VARCHAR,
    launched_by   VARCHAR,               -- cli | mcp
    note          VARCHAR
);

-- A launch past an envelope's soft threshold waits for a person: one row per request.
CREATE TABLE IF NOT EXISTS budget_approvals (
    approval_id   VARCHAR PRIMARY KEY,
    sweep_id      VARCHAR NOT NULL,
    sweep_name    VARCHAR NOT NULL,
    budget        VARCHAR NOT NULL,      -- the envelope whose soft threshold it passes
    approvers     JSON,                  -- who must approve ([] = anyone)
    reserved_usd  DOUBLE NOT NULL,
    reason        VARCHAR NOT NULL,
    flow_run_id   VARCHAR,               -- the paused Prefect flow run
    api_url       VARCHAR,               -- the Prefect API it waits on
    owner         VARCHAR,
    requested_at  TIMESTAMP NOT NULL,
    state         VARCHAR NOT NULL CHECK (state IN ('awaiting', 'approved', 'rejected', 'expired')),
    decided_by    VARCHAR,
    decided_at    TIMESTAMP
);

-- What each running attempt has cost so far (price x elapsed), written every minute while it runs.
CREATE TABLE IF NOT EXISTS trial_accruals (
    sweep_id       VARCHAR NOT NULL,
    trial_id       VARCHAR NOT NULL,
    launch_no      INTEGER NOT NULL,     -- the n-th launch of the trial by this sweep (restarts of a spot attempt included in it)
    started_at     TIMESTAMP NOT NULL,
    updated_at     TIMESTAMP NOT NULL,
    usd_per_hour   DOUBLE NOT NULL,
    elapsed_s      DOUBLE NOT NULL,
    accrued_usd    DOUBLE NOT NULL,
    est_cost_usd   DOUBLE,               -- the estimate it is held to (P90 when the plan has it)
    est_basis      VARCHAR,
    over_estimate  BOOLEAN NOT NULL DEFAULT false,
    running        BOOLEAN NOT NULL,     -- false once its record arrived (the runs row then counts)
    PRIMARY KEY (sweep_id, trial_id, launch_no)
);

-- Alerts sent (deduplicated by alert_key: each alert once per target).
CREATE TABLE IF NOT EXISTS alerts_sent (
    alert_key  VARCHAR PRIMARY KEY,      -- kind:subject:target
    kind       VARCHAR NOT NULL,         -- budget | failed | over_estimate | idle
    subject    VARCHAR NOT NULL,
    target     VARCHAR NOT NULL,         -- the webhook URL (without secrets) or the command
    sent_at    TIMESTAMP NOT NULL,
    ok         BOOLEAN NOT NULL,
    detail     VARCHAR,
    payload    JSON
);
