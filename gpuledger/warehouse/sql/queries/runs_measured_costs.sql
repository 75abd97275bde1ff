-- Cost of each finished, not cancelled attempt of a sweep (USD); the budget meter's measured estimate.
SELECT cost_usd FROM runs WHERE sweep_id = $sweep_id AND status <> 'cancelled'
