-- A person (or the timeout) decided on a waiting launch.
UPDATE budget_approvals SET state = $state, decided_by = $decided_by, decided_at = $decided_at
WHERE approval_id = $approval_id AND state = 'awaiting'
