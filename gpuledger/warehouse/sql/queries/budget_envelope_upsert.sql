-- The envelope as configured now (gpuledger/warehouse/budget_ledger.py).
INSERT OR REPLACE INTO budget_envelopes (budget, scope, "window", limit_usd, soft_usd, approvers, updated_at)
VALUES ($budget, $scope, $window, $limit_usd, $soft_usd, $approvers, $updated_at)
