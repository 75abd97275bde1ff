-- gpuledger status: the trials of each of the sweeps $ids by status (pending, succeeded, failed, pruned, ...)
-- with their planned wall-clock (s), the ETA's input.
SELECT sweep_id, status, count(*) AS trials, coalesce(sum(est_wall_s), 0) AS est_wall_s
FROM trials
WHERE list_contains($ids, sweep_id)
GROUP BY sweep_id, status
ORDER BY sweep_id, status
