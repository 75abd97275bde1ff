-- Cost of each finished, not cancelled trial attempt of a sweep (USD); the budget meter's measured
-- estimate of a trial (a probe's short run is not one; its cost is in sweep_spent).
SELECT cost_usd FROM runs WHERE sweep_id = $sweep_id AND status <> 'cancelled' AND coalesce(purpose, 'trial') = 'trial'
