-- The latest sweep called $name.
SELECT sweep_id FROM v_sweep_roi WHERE sweep_name = $name
ORDER BY started_at DESC NULLS LAST, sweep_id DESC LIMIT 1
