-- The sweep report's headline row.
SELECT * FROM v_sweep_roi WHERE sweep_id = $sweep_id
