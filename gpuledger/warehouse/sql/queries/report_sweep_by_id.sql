-- The sweep with this id, if any (the sweep report checks a --sweep-id).
SELECT sweep_id, sweep_name FROM v_sweep_roi WHERE sweep_id = $sweep_id
