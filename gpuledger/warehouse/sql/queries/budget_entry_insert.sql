-- One movement of money against an envelope; an entry id already there is not written twice.
INSERT INTO budget_ledger (entry_id, recorded_at, budget, window_start, window_end, kind, sweep_id, run_id, reserved_usd,
                           spent_usd, owner, owner_claimed, project, launched_by, note)
VALUES ($entry_id, $recorded_at, $budget, $window_start, $window_end, $kind, $sweep_id, $run_id, $reserved_usd,
        $spent_usd, $owner, $owner_claimed, $project, $launched_by, $note)
ON CONFLICT DO NOTHING
