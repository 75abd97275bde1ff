-- Progress and spend of the sweeps (one sweep by id or name when $sweep is not NULL), newest first:
-- the trials planned and succeeded, and spent_usd, every run's cost (probes included): the same
-- definition of a sweep's spend as sweep_spent (what the budget meter counts).
SELECT s.sweep_id,
       s.name,
       s.status,
       s.started_at,
       s.ended_at,
       s.budget_usd,
       (SELECT count(*) FROM trials t WHERE t.sweep_id = s.sweep_id) AS trials,
       (SELECT count(*) FROM trials t WHERE t.sweep_id = s.sweep_id AND t.status = 'succeeded') AS succeeded,
       (SELECT coalesce(sum(r.cost_usd), 0) FROM runs r WHERE r.sweep_id = s.sweep_id) AS spent_usd
FROM sweeps s
WHERE $sweep IS NULL OR s.sweep_id = $sweep OR s.name = $sweep
ORDER BY s.started_at DESC NULLS LAST, s.updated_at DESC
LIMIT $limit
