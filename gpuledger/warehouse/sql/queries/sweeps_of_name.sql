-- The sweeps registered under a sweep name with their status, most recently started first (which
-- sweep of a spec a run continues: gpuledger/runtime/ids.py).
SELECT sweep_id, status, started_at FROM sweeps WHERE name = $name
ORDER BY started_at DESC NULLS LAST, updated_at DESC
