-- Names of the sweeps in the warehouse, sorted (the sweep report's "known sweeps").
SELECT DISTINCT sweep_name FROM v_sweep_roi WHERE sweep_name IS NOT NULL ORDER BY 1
