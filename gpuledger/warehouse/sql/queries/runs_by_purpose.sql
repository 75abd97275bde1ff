-- A sweep's runs by purpose ('trial' | 'probe', v_runs.purpose): benchmarks/probe_accuracy.py checks
-- that the probes are in the ledger beside the trials.
SELECT purpose, count(*) AS runs, sum(cost_usd) AS cost_usd
FROM v_runs
WHERE sweep_id = $sweep_id
GROUP BY purpose
ORDER BY purpose
