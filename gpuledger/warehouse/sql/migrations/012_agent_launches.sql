-- 012: sweeps launched through `gpuledger mcp` (an agent), so that the agent budget
-- (`[agent] budget_usd`) is counted from the ledger across calls and server restarts.
-- One row per launch; a re-launch of the same spec (same sweep_id) is another row.
CREATE TABLE IF NOT EXISTS agent_launches (
    launch_id    VARCHAR PRIMARY KEY,   -- uuid4 hex
    sweep_id     VARCHAR NOT NULL,      -- sweeps.sweep_id (the row appears once the sweep starts)
    spec_path    VARCHAR NOT NULL,
    spec_sha256  VARCHAR NOT NULL,      -- sha256 of the spec file's bytes that were planned and launched
    plan_id      VARCHAR,               -- the plan the agent fetched first (`plan` tool)
    planned_usd  DOUBLE NOT NULL,       -- the plan's expected spend, counted while the sweep runs
    budget_usd   DOUBLE NOT NULL,       -- the agent budget in force at launch
    launched_at  TIMESTAMP NOT NULL,    -- UTC
    pid          INTEGER,               -- the sweep process
    host         VARCHAR
);
