-- The ten most recently started sweeps' ids (named when a --sweep-id is unknown).
SELECT sweep_id FROM v_sweep_roi ORDER BY started_at DESC NULLS LAST, sweep_id DESC LIMIT 10
