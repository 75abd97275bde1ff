-- Realised spot savings of a sweep.
SELECT * FROM v_spot_savings WHERE sweep_id = $sweep_id
