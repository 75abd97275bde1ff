-- The plan the sweep was launched with (`Plan.to_json()` as stored at registration): the sweep report
-- reads its bands (each trial's est_wall_s_p10/_p90, est_cost_usd_p90, mem_gib_p90, est_band; the
-- totals' P10/P90, the confidence the budget was decided at; gpuledger/plan/bands.py).
SELECT plan_json FROM sweeps WHERE sweep_id = $sweep_id
