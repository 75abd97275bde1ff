-- A running attempt's spend so far (gpuledger/runtime/money.py writes it every money.accrue_interval_s).
INSERT OR REPLACE INTO trial_accruals (sweep_id, trial_id, launch_no, started_at, updated_at, usd_per_hour, elapsed_s,
                                       accrued_usd, est_cost_usd, est_basis, over_estimate, running)
VALUES ($sweep_id, $trial_id, $launch_no, $started_at, $updated_at, $usd_per_hour, $elapsed_s, $accrued_usd,
        $est_cost_usd, $est_basis, $over_estimate, $running)
