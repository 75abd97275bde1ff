-- The user's own measured GPU runs next to their estimates, for the estimator's learnt correction
-- (gpuledger/estimate/calibration.py): one row per succeeded GPU run with both numbers, with the
-- sweep's training method. Measured = peak NVML device memory; the estimate is the device level.
SELECT e.run_id,
       s.method,
       e.accelerator,
       e.est_memory_gib,
       e.measured_memory_gib
FROM v_estimate_accuracy e
JOIN sweeps s ON s.sweep_id = e.sweep_id
WHERE e.status = 'succeeded'
  AND e.gpus > 0
  AND e.est_memory_gib > 0
  AND e.measured_memory_gib > 0
ORDER BY e.run_id
