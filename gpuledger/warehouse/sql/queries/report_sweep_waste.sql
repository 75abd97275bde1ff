-- A sweep's waste by reason, most expensive first.
SELECT * FROM v_waste WHERE sweep_id = $sweep_id ORDER BY cost_usd DESC, reason
