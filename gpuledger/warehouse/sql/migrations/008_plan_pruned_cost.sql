-- 008: the plan's expected cost of each trial under pruning (strategy asha, or tpe with
-- search.pruning; gpuledger/plan/pruning.py), beside its full est_cost_usd; NULL when the sweep does
-- not prune or the expected spend is unknown. The sweep-level number and its source are in
-- sweeps.plan_json -> 'pruning' (source measured | formula | unknown, expected_usd, full_usd, basis).
ALTER TABLE trials ADD COLUMN IF NOT EXISTS est_pruned_cost_usd DOUBLE;
