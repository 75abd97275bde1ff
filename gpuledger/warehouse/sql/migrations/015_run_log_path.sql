-- 015: where a run's whole output is kept (the launcher's log of the attempt: the local launcher's
-- `.gpuledger/landing/SWEEP_ID/logs/RUN_ID.log`), beside the last lines of its stderr (`stderr_tail`),
-- so that a failure shows why (v_runs, the sweep report, the CLI's summary). Null when the launcher
-- keeps no log of its own (SkyPilot: `sky jobs logs`).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS log_path VARCHAR;
