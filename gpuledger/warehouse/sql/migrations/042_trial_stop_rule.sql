-- 042: what stopped a pruned trial (gpuledger/search): 'rung' (successive halving at a rung) or 'curve'
-- (the cost-aware stopping rule, search.stopping: cost, gpuledger/search/extrapolate.py: P(it beats the
-- best so far) x the value of a better recipe < the dollars it still costs); trials.reason holds the
-- numbers. NULL for trials not stopped by the search (and for those stopped before this migration).
ALTER TABLE trials ADD COLUMN IF NOT EXISTS stop_rule VARCHAR;
