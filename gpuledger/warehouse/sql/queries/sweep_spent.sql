-- Money a sweep has spent so far (all runs, probes included, USD); the flow's budget meter.
SELECT coalesce(sum(cost_usd), 0) AS spent_usd FROM runs WHERE sweep_id = $sweep_id
