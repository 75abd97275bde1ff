-- The most recently started sweep of a name.
SELECT sweep_id FROM sweeps WHERE name = $name
ORDER BY started_at DESC NULLS LAST, updated_at DESC LIMIT 1
